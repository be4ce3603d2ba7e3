/*
 * ggml-backend.h — a stand-in for ggml's header of that name, for
 * test_ggml_adapter.c: the hook header that ggml-carve.patch adds to ggml
 * (taken from the patch at build time) needs only GGML_BACKEND_API from it.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#define GGML_BACKEND_API
