// CUTLASS's version, from the headers of the archive the build fetched.
#include <cstdint>

#include <cutlass/version.h>              // include/
#include <cutlass/util/kw_archive_mark.h>  // tools/util/include/ (only in the test's archive)

int64_t cutlass_version() { return CUTLASS_MAJOR * 10000 + CUTLASS_MINOR * 100 + CUTLASS_PATCH; }

int64_t archive_mark() { return KW_ARCHIVE_MARK; }
