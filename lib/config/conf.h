/*
 * conf.h — the CARVE_CONF format (conf.c), shared by the per-device default
 * arenas and by anything else that configures arenas from the environment.
 */
#ifndef CARVE_CONFIG_CONF_H
#define CARVE_CONFIG_CONF_H

#include "base/util.h"
#include "carve.h"

#define CARVE_MAX_DEVICES 64

/* Apply the sections of the CARVE_CONF-style string conf that concern
 * device to *c: all-device sections first, then "deviceN:" ones. The keys
 * backend and device are refused. CARVE_ERR_INVALID (naming the bad key or
 * section, through carve_last_error(NULL)) leaves *c partly applied. */
carve_status carve_conf_apply(carve_config *c, int device, const char *conf) CARVE_INTERNAL;

#endif
