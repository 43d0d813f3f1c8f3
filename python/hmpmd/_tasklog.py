"""The logger a Python kernel gets as ctx.log: its lines start with the task
they came from, e.g. "[job 3 task 'enc' run 5 attempt 0 relu] loaded 4 MiB"."""
import logging

_LOGGER = logging.getLogger("hmpmd.kernel")


class TaskLogger(logging.LoggerAdapter):
    def __init__(self, tag):
        super().__init__(_LOGGER, {"hmpmd_task": tag})

    def process(self, msg, kwargs):
        return "[%s] %s" % (self.extra["hmpmd_task"], msg), kwargs
