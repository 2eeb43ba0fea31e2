"""One comparison run, fully specified before any work starts.

The command line builds a :class:`RunRequest` once and hands the same object to the headless
commands, to the app's comparison child and to the app's retry: the two paths, both sets of load
options, the compare options and the three configuration files *already read* (kernel masks,
advisor rules, equivalence table). A bad config file therefore fails (one line naming it, exit
2) before a long load, and nothing downstream reads a file the user named a second time. Where
the inputs were checked before the run (the app), the request carries them as detected, so that
nothing downstream detects them again either. The request is frozen and picklable, so a spawned
child receives exactly what the parent checked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .options import CompareOptions, LoadOptions

if TYPE_CHECKING:  # the runner imports this module before pandas; the configs need it
    from .advisor.rules import AdvisorConfig
    from .compare.equivalence import Equivalence
    from .compare.masks import Masks
    from .load.detect import Source


@dataclass(frozen=True)
class RunRequest:
    """What to compare and how; build it with :meth:`read`."""

    base: str  # paths as the user gave them (labels of the results)
    comp: str
    base_opts: LoadOptions
    comp_opts: LoadOptions
    compare: CompareOptions
    masks: Masks  # kernel-class keywords (``--config``, else the shipped ones)
    advisor: AdvisorConfig  # advisor rules (``--advisor-config`` on top of the shipped file)
    #: equivalent operators and kernel classes (``--equivalence`` on top of the built-in table)
    equivalence: Equivalence
    advisor_file: str | None = None  # the user's advisor file, named in the advisor's notes
    #: Each input as detected (its kind and the files it will read), when the command line
    #: checked the inputs before starting the run (:meth:`with_sources`): the run then loads
    #: these instead of detecting the paths again. None: the run detects the path itself.
    base_source: Source | None = None
    comp_source: Source | None = None

    def with_sources(self, base: Source, comp: Source) -> RunRequest:
        """This request with both inputs already detected (a step chosen later keeps them: the
        step does not change which files a path names)."""
        return replace(self, base_source=base, comp_source=comp)

    @property
    def inputs(self) -> tuple[str | Source, str | Source]:
        """What the run loads for each side: the detected source, else the path."""
        return (self.base_source or self.base, self.comp_source or self.comp)

    @classmethod
    def read(
        cls,
        base: str,
        comp: str,
        base_opts: LoadOptions,
        comp_opts: LoadOptions,
        compare: CompareOptions,
        *,
        mask_file: str | None = None,
        advisor_file: str | None = None,
        equivalence_file: str | None = None,
    ) -> RunRequest:
        """The request, with every configuration file read now (``InputError`` naming a file
        that cannot be read or holds a mistake)."""
        from .settings import load_settings

        s = load_settings(mask_file, advisor_file, equivalence_file)
        return cls(base, comp, base_opts, comp_opts, compare, s.masks, s.advisor, s.equivalence, s.advisor_file)
