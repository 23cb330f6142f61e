"""Package attributes imported on first use (PEP 562): importing a package for one light module
(the error root, a wing's migrations) then does not load its heavy public names."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name in `names` is imported from the module it
    maps to (a name that is the module's last part is that submodule) and kept on the package,
    so the next access does not come here."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(module)
        value = loaded if module.endswith(f".{name}") else getattr(loaded, name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
