/*
 * options.h — the table of configuration keys shared by carve_config_parse
 * and CARVE_CONF (conf.c).
 */
#ifndef CARVE_CONFIG_OPTIONS_H
#define CARVE_CONFIG_OPTIONS_H

#include "base/util.h"
#include "carve.h"

typedef struct carve_option {
    const char *name;
    const char *help; /* what a value looks like, for error messages */
    int (*set)(carve_config *c, const char *value); /* 0 on success */
    size_t end;       /* where the last field the key sets ends in carve_config */
} carve_option;

extern const carve_option carve_options[] CARVE_INTERNAL; /* NULL-terminated */

/* Parse "123", "4GiB", "1.5 GB" into *bytes, or "0.5" into *fraction (one of
 * the two is set, the other 0). Decimal only: no sign, hexadecimal or
 * exponent; a size must come to whole bytes. 0 on success, -1 on a
 * malformed value. */
int carve_parse_size(const char *text, size_t *bytes, double *fraction) CARVE_INTERNAL;

/* carve_config_parse with keys in denied (NULL-terminated, may be NULL)
 * rejected; where names the caller in messages. A key given twice is
 * refused: within text, and when seen is not NULL also across calls (seen
 * holds one bit per key of carve_options, updated on success). */
carve_status carve_config_parse_keys(carve_config *config, const char *text, const char *const *denied,
                                     const char *where, unsigned *seen) CARVE_INTERNAL;

#endif
