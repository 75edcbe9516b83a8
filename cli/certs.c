/* fedkern certs: the federation's private PKI (CA, server, client and admin
 * certificates) written with the OpenSSL API; layout in common/net/certs.h. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/base/options.h"
#include "common/base/params.h"
#include "common/net/certs.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern certs init  --dir DIR [--cn NAME] [--days N] [--json]\n"
            "       fedkern certs issue --dir DIR --server NAME [--dns N1,N2] [--ip A1,A2]\n"
            "                           [--days N] [--json]\n"
            "       fedkern certs issue --dir DIR --client NAME [--days N] [--json]\n"
            "       fedkern certs issue --dir DIR --admin NAME [--days N] [--json]\n"
            "       fedkern certs revoke --dir DIR NAME [--crl_days N] [--json]\n"
            "       fedkern certs revoke --dir DIR --client NAME|--server NAME|--admin NAME\n"
            "       fedkern certs crl --dir DIR [--crl_days N] [--json]\n"
            "       fedkern certs renew --dir DIR --server NAME|--client NAME|--admin NAME\n"
            "                           [--dns N1,N2] [--ip A1,A2] [--days N] [--json]\n"
            "\n"
            "init creates DIR (mode 0700) with a new CA: ca.pem, ca.key.\n"
            "issue signs a certificate with DIR's CA and writes ROLE-NAME.pem and\n"
            "ROLE-NAME.key (server-, client- or admin-). Keys are ECDSA P-256, mode 0600;\n"
            "existing files are never overwritten.\n"
            "revoke adds ROLE-NAME.pem's serial to DIR/crl.pem (created if missing), signed by\n"
            "the CA; a bare NAME means the one ROLE-NAME.pem that exists. crl creates an empty\n"
            "CRL or re-signs the existing one (do it before its next update date passes).\n"
            "renew (rotation) keeps the old pair as ROLE-NAME.pem.old/.key.old and issues a\n"
            "new one under the same name; 'systemctl reload' makes a server serve it.\n"
            "Copy crl.pem to the server (tls.crl) and reload it: 'systemctl reload fedkern-server'.\n"
            "\n"
            "  --dir DIR       certificate directory (required)\n"
            "  --server NAME   server certificate; its SAN holds DNS:NAME, --dns and --ip\n"
            "  --client NAME   client certificate; NAME is the client identity\n"
            "  --admin NAME    operator certificate allowed to call the admin RPCs\n"
            "  --dns LIST      extra DNS names for a server (comma-separated)\n"
            "  --ip LIST       IPv4/IPv6 addresses for a server (comma-separated)\n"
            "  --days N        validity in days (CA 3650, others 825)\n"
            "  --cn NAME       CA common name (default \"fedkern CA\")\n"
            "  --crl_days N    the CRL's next update is N days away (365)\n"
            "  --json          print the written files as one JSON line\n");
}

/* JSON string with quotes and backslashes escaped (paths come from the user). */
static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* Library messages start with "certs: "; the CLI prefix already says so. */
static int fail(const fk_err *err)
{
    const char *m = err->msg;
    return fk_cli_fail("certs", "%s", strncmp(m, "certs: ", 7) ? m : m + 7);
}

static void report(int json, const char *dir, fk_cert_role role, const char *name)
{
    char pem[4096], key[4096];
    fk_err err = {0};
    if (fk_certs_path(pem, sizeof pem, dir, role, name, "pem", &err) ||
        fk_certs_path(key, sizeof key, dir, role, name, "key", &err)) {
        fail(&err); /* the files were written, only their names cannot be printed */
        return;
    }
    if (json) {
        printf("{\"certificate\":");
        json_str(pem);
        printf(",\"key\":");
        json_str(key);
        printf("}\n");
    } else
        printf("wrote %s\nwrote %s (mode 0600)\n", pem, key);
}

/* The one role option given (exactly one of --server/--client/--admin). */
static int pick_role(fk_params *p, fk_cert_role *role, const char **name)
{
    static const struct {
        const char *opt;
        fk_cert_role role;
    } roles[] = {{"server", FK_ROLE_SERVER}, {"client", FK_ROLE_CLIENT}, {"admin", FK_ROLE_ADMIN}};
    int found = 0;
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        const char *v = fk_params_get(p, roles[i].opt);
        if (v) {
            *role = roles[i].role;
            *name = v;
            found++;
        }
    }
    return found == 1;
}

static void report_crl(int json, const char *dir, const char *what, int added)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/crl.pem", dir);
    if (json) {
        printf("{\"crl\":");
        json_str(path);
        if (what) {
            printf(",\"revoked\":");
            json_str(what);
            printf(",\"added\":%s", added ? "true" : "false");
        }
        printf("}\n");
    } else if (what)
        printf("%s %s\nwrote %s\n", added ? "revoked" : "already revoked:", what, path);
    else
        printf("wrote %s\n", path);
}

/* certs revoke / certs crl. */
static int run_crl(const char *sub, fk_params *p, const char *dir, int json, const char *bare)
{
    fk_err err = {0};
    long days;
    if (fk_params_int(p, "crl_days", 365, 1, 36500, &days, &err) != FK_OK) {
        fk_cli_fail("certs", "%s", err.msg);
        return 2;
    }
    fk_cert_role role = FK_ROLE_NONE;
    const char *name = NULL;
    int picked = pick_role(p, &role, &name);
    if (fk_params_unused(p)) {
        fk_cli_fail("certs", "unknown option --%s for 'certs %s'", fk_params_unused(p), sub);
        return 2;
    }
    if (!strcmp(sub, "crl")) {
        if (bare || picked) {
            fk_cli_fail("certs", "'certs crl' takes no certificate; use 'certs revoke'");
            return 2;
        }
        if (fk_certs_crl(dir, days, &err) != FK_OK)
            return fail(&err);
        report_crl(json, dir, NULL, 0);
        return 0;
    }
    if (bare && !picked) {
        int r = fk_certs_name_ok(bare) ? fk_certs_find_role(dir, bare) : FK_ROLE_NONE;
        if (r <= FK_ROLE_NONE) {
            fk_cli_fail("certs", r < 0 ? "several certificates are named '%s' in %s; say --client, "
                                         "--server or --admin"
                                       : "no server-, client- or admin-%s.pem in %s",
                        bare, dir);
            return 1;
        }
        role = (fk_cert_role)r;
        name = bare;
    } else if (bare || !picked) {
        fk_cli_fail("certs", "give the certificate to revoke: NAME, or one of --client NAME, "
                             "--server NAME, --admin NAME");
        return 2;
    }
    int added = 0;
    if (fk_certs_revoke(dir, role, name, days, &added, &err) != FK_OK)
        return fail(&err);
    char what[128];
    snprintf(what, sizeof what, "%s-%s", role == FK_ROLE_SERVER ? "server" : role == FK_ROLE_CLIENT ? "client" : "admin", name);
    report_crl(json, dir, what, added);
    return 0;
}

static int run(const char *sub, fk_params *p, const char *bare)
{
    fk_err err = {0};
    const char *dir = fk_params_get(p, "dir");
    long days;
    int json;
    if (fk_params_int(p, "days", 0, 1, 36500, &days, &err) != FK_OK ||
        fk_params_bool(p, "json", 0, &json, &err) != FK_OK) {
        fk_cli_fail("certs", "%s", err.msg);
        return 2;
    }
    if (!dir) {
        fk_cli_fail("certs", "--dir DIR is required; see 'fedkern certs --help'");
        return 2;
    }
    fk_cert_opts o = {.days = days};
    if (!strcmp(sub, "revoke") || !strcmp(sub, "crl"))
        return run_crl(sub, p, dir, json, bare);
    if (!strcmp(sub, "init")) {
        const char *cn = fk_params_get(p, "cn");
        if (fk_params_unused(p)) {
            fk_cli_fail("certs", "unknown option --%s for 'certs init'", fk_params_unused(p));
            return 2;
        }
        if (fk_certs_init_ca(dir, cn, &o, &err) != FK_OK)
            return fail(&err);
        report(json, dir, FK_ROLE_NONE, NULL);
        return 0;
    }
    fk_cert_role role = FK_ROLE_NONE;
    const char *name = NULL;
    if (!pick_role(p, &role, &name)) {
        fk_cli_fail("certs", "give exactly one of --server NAME, --client NAME, --admin NAME");
        return 2;
    }
    o.dns = fk_params_get(p, "dns");
    o.ips = fk_params_get(p, "ip");
    if ((o.dns || o.ips) && role != FK_ROLE_SERVER) {
        fk_cli_fail("certs", "--dns and --ip apply to server certificates only");
        return 2;
    }
    if (fk_params_unused(p)) {
        fk_cli_fail("certs", "unknown option --%s for 'certs %s'", fk_params_unused(p), sub);
        return 2;
    }
    int rc = !strcmp(sub, "renew") ? fk_certs_renew(dir, role, name, &o, &err)
                                   : fk_certs_issue(dir, role, name, &o, &err);
    if (rc != FK_OK)
        return fail(&err);
    report(json, dir, role, name);
    return 0;
}

/* Every option of any certs subcommand: an unknown one is a usage error before anything else
 * (which subcommand takes which is checked later). */
static const fk_param_doc all_opts[] = {
    {"dir", ""},    {"cn", ""},   {"days", ""},     {"server", ""}, {"client", ""},
    {"admin", ""},  {"dns", ""},  {"ip", ""},       {"crl_days", ""}, {"json", ""},
    {"help", ""},   {NULL, NULL},
};

int fk_cmd_certs(int argc, char **argv)
{
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (rc != FK_OK) {
        fk_params_close(&p);
        fk_cli_fail("certs", "%s", err.msg);
        return 2;
    }
    if (fk_params_get(&p, "help") || (argc == 1 && !strcmp(argv[0], "help"))) {
        usage(stdout);
        fk_params_close(&p);
        return 0;
    }
    const fk_option_table known[] = {{all_opts, NULL}, {NULL, NULL}};
    if (fk_options_check(&p, known, "fedkern certs", NULL, 0, stderr)) {
        fk_params_close(&p);
        return 2;
    }
    int bare_ok = argc == 2 && !strcmp(argv[0], "revoke"); /* revoke NAME */
    if ((argc != 1 && !bare_ok) || (strcmp(argv[0], "init") && strcmp(argv[0], "issue") &&
                                    strcmp(argv[0], "revoke") && strcmp(argv[0], "crl") &&
                                    strcmp(argv[0], "renew"))) {
        usage(stderr);
        fk_params_close(&p);
        return 2;
    }
    rc = run(argv[0], &p, bare_ok ? argv[1] : NULL);
    fk_params_close(&p);
    return rc;
}
