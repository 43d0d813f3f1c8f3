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


def running(pid):
    """Whether `pid` still runs (a zombie has left already)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
