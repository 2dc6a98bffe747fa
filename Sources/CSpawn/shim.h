// What the receiver needs to start a hand-off command (Sources/CaptureReceiver/HandOff/HandOffCommand.swift)
// that the C library declares only with _GNU_SOURCE, which Swift's Glibc module is built without:
// closing every descriptor from a number up and changing folder in posix_spawn (glibc 2.34 and
// 2.29), and pipe2 (close-on-exec from the start, so no other command started meanwhile inherits it).
#include <spawn.h>
#include <unistd.h>
#include <fcntl.h>

int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *__restrict actions, const char *__restrict path);
int pipe2(int pipefd[2], int flags);
