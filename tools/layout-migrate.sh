#!/bin/sh
# Brings a branch written against the flat common/methods/ layout (before the `layout`
# branch) to the new one, so that merging `layout` afterwards conflicts only where both
# sides changed the same code for other reasons. Run from the top of a clean checkout of that
# branch, then commit; files the branch added under common/methods/ are listed at the end to
# be moved into their family folder by hand (with their meson.build lines).
#   1. git mv of every file the layout branch moved,
#   2. include paths rewritten in every tracked .c, .h and .md file,
#   3. the internal names of *_int.h renamed to fk__/FK__ (unprefixed enum constants only in
#      files that include fedgrem_int.h or pooled_int.h),
#   4. fk__fedrf_draw_sets gained an fk_err argument: calls are listed, not rewritten.
set -eu
mv_if() { if [ -e "$1" ]; then mkdir -p "$(dirname "$2")"; git mv "$1" "$2"; fi; }
M=common/methods
for f in tca rftca mmd classifier optimizer gmm gmm_hc gmm_estep mor_local fedgmm; do
    mv_if $M/$f.c common/models/$f.c
    mv_if $M/$f.h common/models/$f.h
done
for f in fedrf_tca.c fedrf_tca.h fedrf_tca_int.h fedrf_tca_cfg.c fedrf_tca_ckpt.c \
         fedrf_tca_client.c fedrf_tca_msg.c fedrf_tca_server.c; do
    mv_if $M/$f $M/fedrf_tca/$f
done
for f in fedgrem.c fedgrem.h fedgrem_int.h fedgrem_mor.c fedgmm_mor.c pooled_em.c pooled_em.h \
         pooled_em_client.c pooled_em_mor.c gmm_run.c gmm_run.h gmm_real.c gmm_real.h mor.c mor.h; do
    mv_if $M/$f $M/mixture/$f
done
mv_if $M/pooled_em_int.h $M/mixture/pooled_int.h
mv_if $M/pooled_head.c $M/mixture/pooled_shared.c
mv_if server/jobconf.c $M/jobconf.c
mv_if server/jobconf.h $M/jobconf.h
mv_if tests/test_server_jobconf.c tests/test_methods_jobconf.c

PATHS=$(mktemp) NAMES=$(mktemp) ENUMS=$(mktemp)
trap 'rm -f "$PATHS" "$NAMES" "$ENUMS"' EXIT
cat >"$PATHS" <<'SED'
s#common/methods/pooled_em_int\.h#common/methods/mixture/pooled_int.h#g
s#common/methods/pooled_head\.c#common/methods/mixture/pooled_shared.c#g
s#common/methods/\(tca\|rftca\|mmd\|classifier\|optimizer\|gmm\|gmm_hc\|gmm_estep\|mor_local\|fedgmm\)\([.{]\)#common/models/\1\2#g
s#common/methods/\(fedrf_tca\(_int\|_cfg\|_ckpt\|_client\|_msg\|_server\)\?\)\([.{]\)#common/methods/fedrf_tca/\1\3#g
s#common/methods/\(fedgrem\|fedgrem_int\|fedgrem_mor\|fedgmm_mor\|pooled_em\|pooled_em_client\|pooled_em_mor\|gmm_run\|gmm_real\|mor\)\([.{]\)#common/methods/mixture/\1\2#g
s#server/jobconf\.h#common/methods/jobconf.h#g
SED
cat >"$NAMES" <<'SED'
s/\bFK_FEDGREM_GMM\b/FK__FEDGREM_GMM/g
s/\bFK_FEDGREM_INITS\b/FK__FEDGREM_INITS/g
s/\bFK_FEDGREM_MOR\b/FK__FEDGREM_MOR/g
s/\bFK_FEDGREM_TABLE\b/FK__FEDGREM_TABLE/g
s/\bFK_FEDRF_ORDER_ALL\b/FK__FEDRF_ORDER_ALL/g
s/\bFK_FEDRF_ORDER_ORDERED\b/FK__FEDRF_ORDER_ORDERED/g
s/\bFK_FEDRF_ORDER_ORDERED_RANDOM\b/FK__FEDRF_ORDER_ORDERED_RANDOM/g
s/\bFK_FEDRF_ORDER_RANDOM\b/FK__FEDRF_ORDER_RANDOM/g
s/\bFK_FEDRF_ORDER_RANDOM_RANDOM\b/FK__FEDRF_ORDER_RANDOM_RANDOM/g
s/\bFK_FEDRF_ORDER_SUBSET\b/FK__FEDRF_ORDER_SUBSET/g
s/\bfk_dbuf\b/fk__dbuf/g
s/\bfk_dbuf_free\b/fk__dbuf_free/g
s/\bfk_dbuf_push\b/fk__dbuf_push/g
s/\bfk_dbuf_reserve\b/fk__dbuf_reserve/g
s/\bfk_fedgrem_all_bounded\b/fk__fedgrem_all_bounded/g
s/\bfk_fedgrem_apply_perm\b/fk__fedgrem_apply_perm/g
s/\bfk_fedgrem_cfg\b/fk__fedgrem_cfg/g
s/\bfk_fedgrem_cfg_parse\b/fk__fedgrem_cfg_parse/g
s/\bfk_fedgrem_check_data\b/fk__fedgrem_check_data/g
s/\bfk_fedgrem_check_mor_data\b/fk__fedgrem_check_mor_data/g
s/\bfk_fedgrem_cli\b/fk__fedgrem_cli/g
s/\bfk_fedgrem_cli_close\b/fk__fedgrem_cli_close/g
s/\bfk_fedgrem_cli_init\b/fk__fedgrem_cli_init/g
s/\bfk_fedgrem_cli_load\b/fk__fedgrem_cli_load/g
s/\bfk_fedgrem_cli_save\b/fk__fedgrem_cli_save/g
s/\bfk_fedgrem_get_count\b/fk__fedgrem_get_count/g
s/\bfk_fedgrem_model\b/fk__fedgrem_model/g
s/\bfk_fedgrem_model_slice\b/fk__fedgrem_model_slice/g
s/\bfk_fedgrem_put_common\b/fk__fedgrem_put_common/g
s/\bfk_fedgrem_put_fit\b/fk__fedgrem_put_fit/g
s/\bfk_fedgrem_srv_aggregate\b/fk__fedgrem_srv_aggregate/g
s/\bfk_fedgrem_srv_close\b/fk__fedgrem_srv_close/g
s/\bfk_fedgrem_srv_finished\b/fk__fedgrem_srv_finished/g
s/\bfk_fedgrem_srv_init\b/fk__fedgrem_srv_init/g
s/\bfk_fedgrem_srv_load\b/fk__fedgrem_srv_load/g
s/\bfk_fedgrem_srv_model\b/fk__fedgrem_srv_model/g
s/\bfk_fedgrem_srv_plan\b/fk__fedgrem_srv_plan/g
s/\bfk_fedgrem_srv_save\b/fk__fedgrem_srv_save/g
s/\bfk_fedgrem_srv_task\b/fk__fedgrem_srv_task/g
s/\bfk_fedgrem_step_task\b/fk__fedgrem_step_task/g
s/\bfk_fedgrem_take\b/fk__fedgrem_take/g
s/\bfk_fedgrem_take_scalar\b/fk__fedgrem_take_scalar/g
s/\bfk_fedgrem_variant\b/fk__fedgrem_variant/g
s/\bfk_fedrf_cfg\b/fk__fedrf_cfg/g
s/\bfk_fedrf_classifier_params\b/fk__fedrf_classifier_params/g
s/\bfk_fedrf_client\b/fk__fedrf_client/g
s/\bfk_fedrf_client_close\b/fk__fedrf_client_close/g
s/\bfk_fedrf_client_evaluate\b/fk__fedrf_client_evaluate/g
s/\bfk_fedrf_client_init\b/fk__fedrf_client_init/g
s/\bfk_fedrf_client_load\b/fk__fedrf_client_load/g
s/\bfk_fedrf_client_load_batch\b/fk__fedrf_client_load_batch/g
s/\bfk_fedrf_client_save\b/fk__fedrf_client_save/g
s/\bfk_fedrf_client_step\b/fk__fedrf_client_step/g
s/\bfk_fedrf_draw_sets\b/fk__fedrf_draw_sets/g
s/\bfk_fedrf_order\b/fk__fedrf_order/g
s/\bfk_fedrf_parse_cfg\b/fk__fedrf_parse_cfg/g
s/\bfk_fedrf_put_mat\b/fk__fedrf_put_mat/g
s/\bfk_fedrf_put_scalar\b/fk__fedrf_put_scalar/g
s/\bfk_fedrf_put_vec\b/fk__fedrf_put_vec/g
s/\bfk_fedrf_scalar\b/fk__fedrf_scalar/g
s/\bfk_fedrf_server\b/fk__fedrf_server/g
s/\bfk_fedrf_server_aggregate\b/fk__fedrf_server_aggregate/g
s/\bfk_fedrf_server_close\b/fk__fedrf_server_close/g
s/\bfk_fedrf_server_init\b/fk__fedrf_server_init/g
s/\bfk_fedrf_server_load\b/fk__fedrf_server_load/g
s/\bfk_fedrf_server_model\b/fk__fedrf_server_model/g
s/\bfk_fedrf_server_plan\b/fk__fedrf_server_plan/g
s/\bfk_fedrf_server_save\b/fk__fedrf_server_save/g
s/\bfk_fedrf_server_task\b/fk__fedrf_server_task/g
s/\bfk_fedrf_want_len\b/fk__fedrf_want_len/g
s/\bfk_gz_open\b/fk__gz_open/g
s/\bfk_gz_plausible\b/fk__gz_plausible/g
s/\bfk_gz_read_exact\b/fk__gz_read_exact/g
s/\bfk_lines\b/fk__lines/g
s/\bfk_lines_close\b/fk__lines_close/g
s/\bfk_lines_next\b/fk__lines_next/g
s/\bfk_lines_open\b/fk__lines_open/g
s/\bfk_load_csv\b/fk__load_csv/g
s/\bfk_load_finish\b/fk__load_finish/g
s/\bfk_load_idx\b/fk__load_idx/g
s/\bfk_load_libsvm\b/fk__load_libsvm/g
s/\bfk_load_mat\b/fk__load_mat/g
s/\bfk_load_max_values\b/fk__load_max_values/g
s/\bfk_load_npy\b/fk__load_npy/g
s/\bfk_parse_cell\b/fk__parse_cell/g
s/\bfk_pooled_arr\b/fk__pooled_arr/g
s/\bfk_pooled_check_clients\b/fk__pooled_check_clients/g
s/\bfk_pooled_em_cli_close\b/fk__pooled_em_cli_close/g
s/\bfk_pooled_em_cli_evaluate\b/fk__pooled_em_cli_evaluate/g
s/\bfk_pooled_em_cli_init\b/fk__pooled_em_cli_init/g
s/\bfk_pooled_em_cli_load\b/fk__pooled_em_cli_load/g
s/\bfk_pooled_em_cli_save\b/fk__pooled_em_cli_save/g
s/\bfk_pooled_em_cli_step\b/fk__pooled_em_cli_step/g
s/\bfk_pooled_free\b/fk__pooled_free/g
s/\bfk_pooled_head\b/fk__pooled_head/g
s/\bfk_pooled_incomplete\b/fk__pooled_incomplete/g
s/\bfk_pooled_load_head\b/fk__pooled_load_head/g
s/\bfk_pooled_plan\b/fk__pooled_plan/g
s/\bfk_pooled_save\b/fk__pooled_save/g
s/\bfk_pooled_srv_new\b/fk__pooled_srv_new/g
s/\bfk_pooled_take_arrays\b/fk__pooled_take_arrays/g
s/\bfk_pooled_task_head\b/fk__pooled_task_head/g
s/\bfk_pooled_task_op\b/fk__pooled_task_op/g
SED
cat >"$ENUMS" <<'SED'
s/\bCAND_STREAM\b/FK__POOLED_CAND_STREAM/g
s/\bCLIENT_BITS\b/FK__POOLED_CLIENT_BITS/g
s/\bG_MAIN\b/FK__POOLED_G_MAIN/g
s/\bG_SCATTER\b/FK__POOLED_G_SCATTER/g
s/\bG_SUMS\b/FK__POOLED_G_SUMS/g
s/\bS_DONE\b/FK__POOLED_S_DONE/g
s/\bS_EM\b/FK__POOLED_S_EM/g
s/\bS_FAILED\b/FK__POOLED_S_FAILED/g
s/\bS_LLOYD\b/FK__POOLED_S_LLOYD/g
s/\bS_SEED\b/FK__POOLED_S_SEED/g
s/\bV_FEDEM\b/FK__FEDGREM_V_FEDEM/g
s/\bV_FEDGREM\b/FK__FEDGREM_V_FEDGREM/g
s/\bV_LOCAL_EM\b/FK__FEDGREM_V_LOCAL_EM/g
s/\bV_LOCAL_GREM\b/FK__FEDGREM_V_LOCAL_GREM/g
s/\bV_POOLED_GREM\b/FK__FEDGREM_V_POOLED_GREM/g
s/\bV_TGMM\b/FK__FEDGREM_V_TGMM/g
SED
files=$(git ls-files '*.c' '*.h' '*.md')
# shellcheck disable=SC2086
sed -i -f "$PATHS" $files
# shellcheck disable=SC2086
sed -i -f "$NAMES" $files
for f in $(git grep -l -e 'mixture/fedgrem_int\.h' -e 'mixture/pooled_int\.h' -- '*.c' '*.h'); do
    sed -i -f "$ENUMS" "$f"
done
sed -i "s/'jobconf.c', //; s/, 'jobconf.c'//" server/meson.build
# Sort each block of #include "..." lines in the files changed above, as the layout branch did.
git diff --name-only -- '*.c' '*.h' | python3 -c '
import sys
for p in sys.stdin.read().split():
    lines, out, i = open(p).read().split("\n"), [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].startswith("#include \""):
            j += 1
        if j > i:
            out += sorted(dict.fromkeys(lines[i:j]))
            i = j
        else:
            out.append(lines[i])
            i += 1
    open(p, "w").write("\n".join(out))
'
echo "calls of fk__fedrf_draw_sets (now: ..., inC, fk_err *err), check them:"
git grep -n 'fk__fedrf_draw_sets' -- '*.c' || true
echo "files of this branch still at the top of common/methods/ (move into a family folder):"
git ls-files "$M/*.c" "$M/*.h" | grep -v -e "^$M/[^/]*/" \
    -e "$M/\(method.h\|registry.c\|sim.c\|sim.h\|aggregate.c\|aggregate.h\|jobconf.c\|jobconf.h\)$" || true
