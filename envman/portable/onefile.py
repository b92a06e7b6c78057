"""The one-file kit's loader: a meta-path finder serving the island's modules from their text."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType
from typing import Any, Dict, FrozenSet, Optional, Sequence


class KitFinder(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    def __init__(self, top: str, where: str, sources: Dict[str, str], packages: FrozenSet[str]) -> None:
        self.top = top
        self.where = where  # the folder holding the kit file: where the island's folder would be
        self.sources = sources
        self.packages = packages

    def origin(self, fullname: str) -> str:
        parts = fullname.split(".")[1:]
        if fullname in self.packages:
            return os.path.join(self.where, self.top, *parts, "__init__.py")
        return os.path.join(self.where, self.top, *parts[:-1], parts[-1] + ".py")

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
                  ) -> Optional[ModuleSpec]:
        if fullname not in self.sources:
            return None
        spec = importlib.util.spec_from_loader(fullname, self, origin=self.origin(fullname),
                                               is_package=fullname in self.packages)
        if spec is not None:
            spec.has_location = True  # __file__ as the folder kit had it: smoke's messages name a module's file
        return spec

    def is_package(self, fullname: str) -> bool:
        return fullname in self.packages

    def get_source(self, fullname: str) -> str:
        # linecache asks a frame's loader for the source under the frame's __name__: for the module `python -m`
        # runs that is "__main__" (torch's import reads the stack, so every smoke import failed with KeyError),
        # answered from the spec the module was run by; a name the kit does not hold is ImportError, as the
        # InspectLoader protocol says (linecache then shows no line instead of failing)
        if fullname == "__main__":
            spec = getattr(sys.modules.get("__main__"), "__spec__", None)
            fullname = getattr(spec, "name", fullname)
        if fullname not in self.sources:
            raise ImportError("%r is not in the kit" % fullname, name=fullname)
        return self.sources[fullname]

    def get_code(self, fullname: str) -> CodeType:
        return compile(self.sources[fullname], self.origin(fullname), "exec", dont_inherit=True)
    # create_module and exec_module: the Loader's and InspectLoader's own (a fresh module, then get_code executed)


def install(module_globals: Dict[str, Any], sources: Dict[str, str], packages: FrozenSet[str]) -> None:
    """Make the module whose globals these are the island's top package, with its submodules served from text."""
    top = str(module_globals["__name__"])
    where = os.path.dirname(os.path.abspath(str(module_globals.get("__file__") or ".")))
    module_globals["__path__"] = []  # a package: `import top.smoke` asks the meta path for its submodules
    if any(isinstance(f, KitFinder) and f.top == top for f in sys.meta_path):
        return
    renamed = {top + name[len("envman_portable"):]: text for name, text in sources.items()}
    pkgs = frozenset(top + name[len("envman_portable"):] for name in packages)
    sys.meta_path.insert(0, KitFinder(top, where, renamed, pkgs))
