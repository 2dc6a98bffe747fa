#!/usr/bin/python3
"""A FUSE file system that loses what a power cut loses, for the durability tests (issue 28).

usage: powercut_fs.py BACKING MOUNTPOINT

It passes a folder (BACKING) through at MOUNTPOINT, except file data: writes and truncations are
kept in this process's memory, as a disk's write-back cache or a network file system daemon keeps
them, and reach BACKING only when fsync(2) or fdatasync(2) covers the file. A "power cut" is
SIGKILL of this process: every byte no fsync covered is gone, and BACKING holds exactly what
survives. Mount it again over the same BACKING to "restart" on the surviving bytes.

Like every FUSE file system (without virtiofs' sync_fs), it never sees syncfs(2): the kernel answers
syncfs on a FUSE mount without asking the server, so syncfs makes nothing durable here. That is
the fact the durability design has to survive.

What it models and what it does not (in the manner of LazyFS, which drops a FUSE cache's unsynced
writes on command):
- data: lost unless an fsync or fdatasync of that file covered it (close(2) does not, as on a disk);
- names, folders, ownership and modes: passed through at once, so they survive a cut even without
  an fsync of their folder (a real file system may lose them too; these tests are about data);
- locks: left to the kernel (one mount), which is how a local mount behaves.

Runs in the foreground, multi-threaded, one mutex around the cache. Mounted with allow_other and
default_permissions, so an unprivileged receiver can use it with the kernel checking modes; files
and folders are created owned by the caller.
"""
import errno
import os
import sys
import threading

from fusepy import FUSE, FuseOSError, Operations, fuse_get_context


class CachedFile:
    """The unsynced state of one file (by backing inode): its whole image and the dirty ranges."""

    def __init__(self, backing_path):
        with open(backing_path, "rb") as handle:
            self.image = bytearray(handle.read())
        self.dirty = []  # (start, end) ranges written since the last fsync
        self.resized = False  # the size changed since the last fsync

    def write(self, data, offset):
        end = offset + len(data)
        if end > len(self.image):
            self.image.extend(b"\0" * (end - len(self.image)))
            self.resized = True
        self.image[offset:end] = data
        self.dirty.append((offset, end))

    def truncate(self, length):
        if length < len(self.image):
            del self.image[length:]
        else:
            self.image.extend(b"\0" * (length - len(self.image)))
        self.dirty = [(start, min(end, length)) for start, end in self.dirty if start < length]
        self.resized = True

    def flush_to(self, descriptor):
        """Writes the dirty ranges and the size to the backing file and fsyncs it."""
        if self.resized:
            os.ftruncate(descriptor, len(self.image))
        for start, end in merged(self.dirty):
            os.pwrite(descriptor, bytes(self.image[start:end]), start)
        os.fsync(descriptor)
        self.dirty = []
        self.resized = False


def merged(ranges):
    result = []
    for start, end in sorted(ranges):
        if result and start <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return result


class PowerCutFS(Operations):
    def __init__(self, backing):
        self.backing = os.path.realpath(backing)
        self.mutex = threading.Lock()
        self.cache = {}  # backing inode -> CachedFile
        self.handles = {}  # file handle -> (backing descriptor, inode)
        self.next_handle = 1

    def full(self, path):
        return os.path.join(self.backing, path.lstrip("/"))

    def own(self, path):
        uid, gid, _ = fuse_get_context()
        os.lchown(path, uid, gid)

    # Metadata: passed through.

    def getattr(self, path, fh=None):
        try:
            info = os.lstat(self.full(path))
        except OSError as error:
            raise FuseOSError(error.errno)
        attributes = {key: getattr(info, key) for key in (
            "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid", "st_ino")}
        with self.mutex:
            cached = self.cache.get(info.st_ino)
            if cached is not None:
                attributes["st_size"] = len(cached.image)
        return attributes

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self.full(path))

    def access(self, path, mode):
        if not os.access(self.full(path), os.F_OK):
            raise FuseOSError(errno.ENOENT)

    def mkdir(self, path, mode):
        os.mkdir(self.full(path), mode)
        self.own(self.full(path))

    def rmdir(self, path):
        os.rmdir(self.full(path))

    def unlink(self, path):
        full = self.full(path)
        info = os.lstat(full)
        os.unlink(full)
        with self.mutex:
            if info.st_nlink <= 1 and not any(inode == info.st_ino for _, inode in self.handles.values()):
                self.cache.pop(info.st_ino, None)

    def rename(self, old, new):
        os.rename(self.full(old), self.full(new))

    def link(self, target, source):
        os.link(self.full(source), self.full(target))

    def symlink(self, target, source):
        os.symlink(source, self.full(target))
        self.own(self.full(target))

    def readlink(self, path):
        return os.readlink(self.full(path))

    def chmod(self, path, mode):
        os.chmod(self.full(path), mode)

    def chown(self, path, uid, gid):
        os.lchown(self.full(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self.full(path), times)

    def statfs(self, path):
        info = os.statvfs(self.full(path))
        return {key: getattr(info, key) for key in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def fsyncdir(self, path, datasync, fh):
        descriptor = os.open(self.full(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    # Data: cached until fsync.

    def register(self, descriptor):
        inode = os.fstat(descriptor).st_ino
        with self.mutex:
            handle = self.next_handle
            self.next_handle += 1
            self.handles[handle] = (descriptor, inode)
        return handle

    def open(self, path, flags):
        full = self.full(path)
        # Truncation on open is a data change like any other: cached.
        descriptor = os.open(full, os.O_RDWR if os.access(full, os.W_OK) else os.O_RDONLY)
        handle = self.register(descriptor)
        if flags & os.O_TRUNC:
            self.truncate(path, 0, handle)
        return handle

    def create(self, path, mode, fi=None):
        full = self.full(path)
        descriptor = os.open(full, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        self.own(full)
        return self.register(descriptor)

    def cached(self, handle):
        """The cache entry of an open file, made from the backing file on first use (lock held)."""
        descriptor, inode = self.handles[handle]
        entry = self.cache.get(inode)
        if entry is None:
            entry = CachedFile("/proc/self/fd/%d" % descriptor)
            self.cache[inode] = entry
        return entry

    def read(self, path, size, offset, fh):
        with self.mutex:
            descriptor, inode = self.handles[fh]
            entry = self.cache.get(inode)
            if entry is not None:
                return bytes(entry.image[offset:offset + size])
        return os.pread(descriptor, size, offset)

    def write(self, path, data, offset, fh):
        with self.mutex:
            self.cached(fh).write(data, offset)
        return len(data)

    def truncate(self, path, length, fh=None):
        with self.mutex:
            if fh is not None and fh in self.handles:
                self.cached(fh).truncate(length)
                return
        descriptor = os.open(self.full(path), os.O_RDWR)
        handle = self.register(descriptor)
        try:
            with self.mutex:
                self.cached(handle).truncate(length)
        finally:
            self.release(path, handle)

    def fsync(self, path, datasync, fh):
        with self.mutex:
            descriptor, inode = self.handles[fh]
            entry = self.cache.get(inode)
            if entry is not None:
                writable = os.open("/proc/self/fd/%d" % descriptor, os.O_WRONLY)
                try:
                    entry.flush_to(writable)
                finally:
                    os.close(writable)
                del self.cache[inode]
            else:
                os.fsync(descriptor)

    def flush(self, path, fh):
        # close(2) makes nothing durable.
        return 0

    def release(self, path, fh):
        with self.mutex:
            descriptor, _ = self.handles.pop(fh)
        os.close(descriptor)
        return 0


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: powercut_fs.py BACKING MOUNTPOINT")
    backing, mountpoint = sys.argv[1], sys.argv[2]
    FUSE(PowerCutFS(backing), mountpoint, foreground=True, nothreads=False, allow_other=True,
         default_permissions=True, fsname="powercut", subtype="powercut")


if __name__ == "__main__":
    main()
