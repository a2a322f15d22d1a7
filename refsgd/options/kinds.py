"""The kinds of option values: a Python type and range each (refsgd.options' table uses them).

``parse`` reads the command line's text (refsgd.cli.cmdoptions makes it an argparse type);
``check`` checks a Python value (``refsgd.train``'s keywords). Both return the value or raise
ValueError with the message shown after ``argument --flag:`` or ``keyword=value:``.
"""

import dataclasses
import math
import numbers
import os


class Kind:
    """The type and range of an option's values: ``parse`` reads the command line's text,
    ``check`` a Python value; both return the value or raise ValueError with the message after
    ``--flag:`` or ``keyword=value:``."""

    type = str
    choices = None

    def parse(self, text):
        return self.check(text)

    def check(self, v):
        return v


@dataclasses.dataclass(frozen=True)
class Int(Kind):
    """An integer >= ``low`` (a bool is not one)."""

    low: int = 0
    type = int

    def what(self):
        return "a positive integer" if self.low == 1 else f"an integer >= {self.low}"

    def parse(self, text):
        try:
            return self.check(int(text))
        except ValueError:
            raise ValueError(f"expected {self.what()}, got {text!r}") from None

    def check(self, v):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < self.low:
            raise ValueError(f"expected {self.what()}")
        return int(v)


@dataclasses.dataclass(frozen=True)
class Float(Kind):
    """A finite number >= ``low``; an int is taken as the float it is (a bool or a str is not)."""

    low: float = 0.0
    type = float

    def parse(self, text):
        try:
            v = float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
        try:
            return self.check(v)
        except ValueError:
            raise ValueError(f"expected a finite number >= {self.low:g}, got {text!r}") from None

    def check(self, v):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError("expected a number")
        if not math.isfinite(v) or v < self.low:
            raise ValueError(f"expected a finite number >= {self.low:g}")
        return float(v)


@dataclasses.dataclass(frozen=True)
class Choice(Kind):
    """One of ``choices`` (strings)."""

    choices: tuple = ()

    def check(self, v):
        if v not in self.choices:
            raise ValueError(f"expected one of {', '.join(self.choices)}")
        return v


@dataclasses.dataclass(frozen=True)
class Flag(Kind):
    """True or False; on the command line ``--name`` (store_true), or ``--name/--no-name`` when
    ``negatable``."""

    negatable: bool = False
    type = bool

    def check(self, v):
        if not isinstance(v, bool):
            raise ValueError("expected True or False (a flag)")
        return v


@dataclasses.dataclass(frozen=True)
class Text(Kind):
    """A string; ``path``: also an os.PathLike (taken as its str)."""

    path: bool = False

    def check(self, v):
        if self.path and isinstance(v, os.PathLike):
            return os.fspath(v)
        if not isinstance(v, str):
            raise ValueError("expected a path (str or os.PathLike)" if self.path else "expected a string")
        if self.path and not v.strip():  # '' names no file: refused, never taken for "no output"
            raise ValueError("an empty path: give a file or folder name, or leave the option out")
        return v


class Every(Text):
    """--eval-every: "E" epochs or "Nit" iterations, kept as text (the configuration records it);
    from Python also a positive int E."""

    def check(self, v):
        t = str(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else super().check(v)
        t = t.strip()
        n = t[:-2] if t.endswith("it") else t
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"expected E (epochs) or Nit (iterations), a positive integer, got {v!r}")
        return t

    def parse(self, text):
        return self.check(text)
