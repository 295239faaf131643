"""Progress bars through tqdm when it is installed (the `progress` extra);
without it, progress=True is a no-op rather than an error."""

import contextlib

try:
    import tqdm as _tqdm
except ImportError:  # pragma: no cover - depends on the environment
    _tqdm = None


class _NoBar:
    n = 0

    def update(self, n=1):
        self.n += n

    def set_description(self, *_args, **_kwargs):
        pass

    def set_postfix_str(self, *_args, **_kwargs):
        pass

    def close(self):
        pass


@contextlib.contextmanager
def bar(enabled: bool, **kwargs):
    """A tqdm bar when `enabled` and tqdm is available, else an object with the same methods."""
    b = _tqdm.tqdm(**kwargs) if enabled and _tqdm is not None else _NoBar()
    try:
        yield b
    finally:
        b.close()
