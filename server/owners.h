/* Job ownership (issue 33): every admin may submit jobs; a job belongs to the admin who
 * submitted it, recorded with the job's stored config; only its owner and the operators may
 * read it (status, result, list), predict on it or cancel it. The server's `admins` list
 * gives the roles: an entry "NAME" or "NAME:owner" is an owner of its own jobs,
 * "NAME:operator" may use every job. An empty list lets any admin certificate in as an
 * owner. A job stored before owners were recorded belongs to every admin. */
#ifndef FK_SERVER_OWNERS_H
#define FK_SERVER_OWNERS_H

#include <stddef.h>

#include "common/base/err.h"

enum { FK_ADMIN_NONE = 0, FK_ADMIN_OWNER = 1, FK_ADMIN_OPERATOR = 2 };

/* The role of an admin certificate's identity under the `admins` list (n == 0: owner). */
int fk_owners_role(char *const *admins, int n, const char *identity);

/* FK_EINVAL naming an entry whose ":ROLE" is close to "owner" or "operator" but neither (a
 * typo would otherwise read as an identity that never calls); FK_OK otherwise. */
FK_CHECKRETURN int fk_owners_check(char *const *admins, int n, fk_err *err);

/* The config as stored: a first line recording the owner, then the submitted text
 * (*out malloc'd). The line is a comment: the job file's keys are unchanged. */
FK_CHECKRETURN int fk_owners_tag(const char *config, const char *owner, char **out, fk_err *err);

/* The owner a stored config records into out ("" when it records none). */
void fk_owners_of(const char *config, char *out, size_t cap);

/* 1 when identity (of role `role`) may use a job owned by `owner` ("" = every admin). */
int fk_owners_may(int role, const char *owner, const char *identity);

#endif
