"""Stand-ins for a submission's broken parts: the judge's own code bound in place of a student's function, so
the code built on that function is graded on its own merits.

A stand-in is source text the judge sends (a lesson's recipe, which the course text already gives: nothing a
student could not write from it). It is compiled here and bound wherever the student's modules hold the
function it replaces: the defining module's name and every other module's alias of the same object
(``from .helpers import helper``); a file imported later takes the stand-in from the defining module.
:meth:`StandIns.restore` puts the student's own objects back when the judge changes the stand-ins within a block.
A block runs in a child of the worker (worker/main.py), which ends with it: whatever the submission's code kept of a
stand-in (in a list, an attribute, a closure) ends there too, and the worker serves on as it was before the block.
The judge never takes this process's word that a stand-in was used (it installs them and reads every answer as any
other).
"""

import builtins
import types


class StandIns:
    """The stand-ins bound in one worker's submission now, each with the student's object it replaced."""

    def __init__(self):
        self.modules = {}  # the session's modules (name -> module, or an error record), read at each restore
        self.originals = {}  # id of a stand-in -> (the stand-in, the student's object)

    def install(self, modules: dict, lookup, sources: dict[str, str]) -> None:
        """Bind a stand-in for each contract name in ``sources`` (name -> source text defining that name) in
        every imported student module of ``modules`` (name -> module, or an error record); ``lookup(name)`` is the
        student's object by its contract name (importing its file). Earlier stand-ins are put back first."""
        self.restore()
        self.modules = modules
        made = {}
        for name, source in sources.items():
            original = lookup(name)  # the student's object; its file's import failure is raised as usual
            namespace = {"__name__": f"stand_in_{name}", "__builtins__": builtins}
            exec(compile(source, f"<stand-in for {name}>", "exec"), namespace)  # noqa: S102 - the judge's own source
            made[id(original)] = namespace[name]
            self.originals[id(namespace[name])] = (namespace[name], original)
        self._swap(made)

    def restore(self) -> None:
        """Put the student's object back wherever a stand-in is bound."""
        self._swap({key: original for key, (_, original) in self.originals.items()})
        self.originals.clear()

    def _swap(self, replacements: dict) -> None:
        """In every imported student module, each name bound to an object whose id is a key of ``replacements``
        is bound to that key's value."""
        for module in [module for module in self.modules.values() if isinstance(module, types.ModuleType)]:
            for key, value in list(vars(module).items()):
                replacement = replacements.get(id(value))
                if replacement is not None:
                    setattr(module, key, replacement)
