"""Processes of a test, found through /proc."""
import os


def children(pid):
    """The PIDs whose parent is `pid`, sorted (zombies included)."""
    kids = []
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid):
            kids.append(int(entry))
    return sorted(kids)
