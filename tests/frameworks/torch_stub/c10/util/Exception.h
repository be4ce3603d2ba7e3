// Exception.h — a stand-in for PyTorch's c10/util/Exception.h, so that
// python/carve/_torch_shim.cpp builds and runs without torch installed
// (tests/frameworks/test_torch_shim.cpp). Only what the shim uses: c10::Error
// and c10::OutOfMemoryError, TORCH_CHECK and TORCH_CHECK_WITH, each throwing
// with the message it is given.
#pragma once
#include <stdexcept>

namespace c10 {
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct OutOfMemoryError : Error {
    using Error::Error;
};
} // namespace c10

#define TORCH_CHECK(cond, msg)                                                                                      \
    do {                                                                                                            \
        if (!(cond))                                                                                                \
            throw ::c10::Error(msg);                                                                                \
    } while (0)
#define TORCH_CHECK_WITH(kind, cond, msg)                                                                           \
    do {                                                                                                            \
        if (!(cond))                                                                                                \
            throw ::c10::kind(msg);                                                                                 \
    } while (0)
