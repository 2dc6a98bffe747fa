// sync_file_range(2), which the C library declares only with _GNU_SOURCE (Swift's Glibc module is
// built without it): the CAF writer starts the writeback of the audio it wrote without waiting for
// it (Sources/CAF/PosixFile.swift, startWriteback).
#include <fcntl.h>

int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags);

// SYNC_FILE_RANGE_WRITE: start writing the range's dirty pages, do not wait.
#define CAPTURE_SYNC_FILE_RANGE_WRITE 2u
