"""The SciPy special functions the audit uses, without importing the `scipy.special` package.

`from scipy import special` costs about 0.3 s of CPU, a quarter of a default `run`: the
package's `__init__` imports `_support_alternative_backends`, whose array-API layer clones
NumPy's namespace (importing numpy.f2py, numpy.testing, numpy.ma … on the way) and parses the
docstrings of ~90 wrappers. The functions themselves live in the compiled module
`scipy.special._ufuncs`, and for NumPy input `scipy.special.betaincinv` *is* that module's
ufunc (the same object), so results are bit-identical.

Importing a submodule runs its package's `__init__` first. To import `_ufuncs` alone, the
`scipy.special` package stands in sys.modules unexecuted (made from its own spec) for that one
import and is removed right after: a later `import scipy.special` (a user's, scipy.stats')
runs the real package, which reuses the extension modules already loaded. If `scipy.special`
is already imported it is used as is, and if the short route fails (a SciPy layout change)
the whole package is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

_PACKAGE = "scipy.special"


def _ufuncs() -> ModuleType:
    if _PACKAGE not in sys.modules:
        spec = importlib.util.find_spec(_PACKAGE)  # imports `scipy` (cheap), not `scipy.special`
        if spec is not None and spec.submodule_search_locations is not None:
            bare = importlib.util.module_from_spec(spec)
            sys.modules[_PACKAGE] = bare
            try:
                return importlib.import_module(_PACKAGE + "._ufuncs")
            except ImportError:
                pass
            finally:
                if sys.modules.get(_PACKAGE) is bare:
                    del sys.modules[_PACKAGE]
    return importlib.import_module(_PACKAGE)


_module = _ufuncs()
betainc: Any = _module.betainc
betaincinv: Any = _module.betaincinv
gammainc: Any = _module.gammainc
gammaincinv: Any = _module.gammaincinv
gammaln: Any = _module.gammaln
stdtrit: Any = _module.stdtrit
ndtri: Any = _module.ndtri
