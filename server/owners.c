#include "server/owners.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/suggest.h"

/* The first line of a stored config: only the server writes it (a submitted file's own
 * comment of that form is on a later line and never read). */
static const char TAG[] = "# fedkern owner: ";

static const char *const roles[] = {"owner", "operator"};

/* The role suffix of an entry ("alice:operator": 2), 0 when it has none; *name_len is the
 * length of the identity part. Identities may contain ':', so only a known role counts. */
static int entry_role(const char *entry, size_t *name_len)
{
    const char *colon = strrchr(entry, ':');
    *name_len = strlen(entry);
    for (int r = 0; colon && r < 2; r++)
        if (!strcmp(colon + 1, roles[r])) {
            *name_len = (size_t)(colon - entry);
            return r + 1;
        }
    return 0;
}

int fk_owners_role(char *const *admins, int n, const char *identity)
{
    if (n == 0)
        return FK_ADMIN_OWNER;
    int best = FK_ADMIN_NONE;
    size_t il = strlen(identity);
    for (int i = 0; i < n; i++) {
        size_t nl;
        int r = entry_role(admins[i], &nl);
        if (nl == il && !strncmp(admins[i], identity, il) && (r ? r : FK_ADMIN_OWNER) > best)
            best = r ? r : FK_ADMIN_OWNER;
    }
    return best;
}

int fk_owners_check(char *const *admins, int n, fk_err *err)
{
    for (int i = 0; i < n; i++) {
        size_t nl;
        const char *colon = strrchr(admins[i], ':');
        if (!colon || entry_role(admins[i], &nl))
            continue;
        size_t sl = strlen(colon + 1);
        for (int r = 0; r < 2; r++)
            if (fk_edit_distance(colon + 1, sl, roles[r], strlen(roles[r])) <=
                fk_suggest_max_distance(strlen(roles[r])))
                return fk_err_set(err, FK_EINVAL,
                                  "admins: entry '%s': unknown role '%s'; did you mean '%s'? "
                                  "(NAME, NAME:owner or NAME:operator)",
                                  admins[i], colon + 1, roles[r]);
    }
    return FK_OK;
}

int fk_owners_tag(const char *config, const char *owner, char **out, fk_err *err)
{
    size_t n = strlen(TAG) + strlen(owner) + 1 + strlen(config) + 1;
    *out = malloc(n);
    if (!*out)
        return fk_err_set(err, FK_ENOMEM, "out of memory for the job config");
    snprintf(*out, n, "%s%s\n%s", TAG, owner, config);
    return FK_OK;
}

void fk_owners_of(const char *config, char *out, size_t cap)
{
    *out = '\0';
    if (!config || strncmp(config, TAG, strlen(TAG)) || cap == 0)
        return;
    const char *v = config + strlen(TAG);
    size_t l = strcspn(v, "\r\n");
    if (l >= cap)
        l = cap - 1;
    memcpy(out, v, l);
    out[l] = '\0';
}

int fk_owners_may(int role, const char *owner, const char *identity)
{
    return role == FK_ADMIN_OPERATOR ||
           (role == FK_ADMIN_OWNER && (!*owner || !strcmp(owner, identity)));
}
