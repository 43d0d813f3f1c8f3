"""The logger a Python kernel gets as ctx.log: its lines start with the task
they came from, e.g. "[job 3 task 'enc' run 5 attempt 0 relu] loaded 4 MiB",
in the worker's log, and are kept with the task by the controller (REST
GET /api/v1/jobs/{id}/logs?task=..., the dashboard) as "INFO loaded 4 MiB"."""
import logging

_LOGGER = logging.getLogger("hmpmd.kernel")


class TaskLogger(logging.LoggerAdapter):
    def __init__(self, tag, sink=None):
        super().__init__(_LOGGER, {"hmpmd_task": tag})
        self._sink = sink

    def process(self, msg, kwargs):
        return "[%s] %s" % (self.extra["hmpmd_task"], msg), kwargs

    def log(self, level, msg, *args, **kwargs):
        # INFO and above are kept with the task whatever the worker's own log
        # level, so that a user sees them without the worker's stderr.
        if self._sink is not None and (level >= logging.INFO or self.isEnabledFor(level)):
            try:
                text = str(msg) % args if args else str(msg)
            except (TypeError, ValueError):
                text = "%s %r" % (msg, args)
            self._sink("%s %s" % (logging.getLevelName(level), text))
        super().log(level, msg, *args, **kwargs)
