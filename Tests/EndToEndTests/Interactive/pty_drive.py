#!/usr/bin/env python3
"""Drives a program through a pseudo-terminal, as a person at its keyboard would, following a
script of steps; used by the end-to-end tests of `capture-send --interactive`.

Usage: pty_drive.py STEPS_FILE -- COMMAND [ARGUMENT...]

Steps, one a line (blank lines and lines starting with # are skipped):
  expect N TEXT   wait until TEXT has appeared at least N times in what the program wrote
  keys TEXT       type TEXT; Python string escapes apply (\\r is Enter, \\x1b Escape)
  signal NAME     send the signal NAME (for example USR1) to the program
  say TEXT        write "reached TEXT" on standard output (the test waits for it)
  await PATH      wait until the file PATH exists (the test creates it)

Everything the program writes is copied to standard error as it comes. Once the steps are done
the driver waits for the program to exit and exits with its status (128 + N for a signal N). A step
that waits more than 120 s ends the program and the driver with status 100, naming the step.
"""
import os
import pty
import select
import signal
import sys
import time

TIMEOUT = 120.0


def main():
    steps_path = sys.argv[1]
    if sys.argv[2] != "--":
        sys.exit("usage: pty_drive.py STEPS_FILE -- COMMAND [ARGUMENT...]")
    command = sys.argv[3:]
    steps = []
    with open(steps_path, encoding="utf-8") as steps_file:
        for line in steps_file:
            line = line.rstrip("\n")
            if line.strip() and not line.startswith("#"):
                steps.append(line)

    pid, master = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)

    output = bytearray()

    def pump(timeout):
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(master, 65536)
        except OSError:
            return False  # the program closed the terminal (it exited)
        if not data:
            return False
        output.extend(data)
        sys.stderr.buffer.write(data)
        sys.stderr.flush()
        return True

    def give_up(step):
        sys.stdout.write("timed out at step: %s\n" % step)
        sys.stdout.flush()
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        sys.exit(100)

    def wait_until(step, condition):
        deadline = time.monotonic() + TIMEOUT
        while not condition():
            if time.monotonic() > deadline:
                give_up(step)
            if not pump(0.05) and not condition():
                give_up(step + " (the program ended)")

    for step in steps:
        kind, _, rest = step.partition(" ")
        if kind == "expect":
            count, _, text = rest.partition(" ")
            needle = text.encode("utf-8")
            wait_until(step, lambda: output.count(needle) >= int(count))
        elif kind == "keys":
            os.write(master, rest.encode("utf-8").decode("unicode_escape").encode("latin-1"))
        elif kind == "signal":
            os.kill(pid, getattr(signal, "SIG" + rest))
        elif kind == "say":
            sys.stdout.write("reached %s\n" % rest)
            sys.stdout.flush()
        elif kind == "await":
            wait_until(step, lambda: os.path.exists(rest))
        else:
            sys.exit("unknown step: %s" % step)

    while pump(0.05):
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            break
    else:
        _, status = os.waitpid(pid, 0)
    while pump(0):
        pass
    code = os.waitstatus_to_exitcode(status)
    sys.stdout.write("exit %d\n" % code)
    sys.stdout.flush()
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
