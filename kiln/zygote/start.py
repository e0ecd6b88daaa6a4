"""kiln-init's start: the descriptors and names its environment carries, written by the zygote
for a slot (slot.spawn) and for a language's template (template.start). kiln-init reads them
once (start.c read_environment) and clears its environment; `kiln-init contract` lists the names
it reads, which tests/unit/test_contract.py compares with these."""

from __future__ import annotations

from dataclasses import dataclass, fields

# the zygote's clones of the lower layers' folders (SlotSpec.lower), one variable each, in order
LOWER_VARIABLES = ("KILN_LOWER_WORKSPACES", "KILN_LOWER_LAYERS")
# a language's template adds these for each slot it forks (template.c): the task's socket and pid
FORKED_VARIABLES = ("KILN_FORKED", "KILN_FORKED_PID")


@dataclass(frozen=True)
class Start:
    sock: int  # the slot's (or template's) end of its socket with the zygote, then the front
    zygote: int  # a pidfd of the zygote (a pid means nothing in the slot's pid namespace)
    recipe: int  # the index's recipe, a sealed memfd (recipe.py)
    root_image: int | None = None  # the index's root image (a mount namespace), once built
    cg_dirs: tuple[int, ...] = ()  # SlotCgroup.fd_groups()
    cg_procs: tuple[int, ...] = ()
    lower: tuple[int, ...] = ()  # LOWER_VARIABLES' descriptors, where the zygote holds them
    prestart: str | None = None  # the language a prestarted slot serves
    template_module: int | None = None  # a template's module, a memfd (template.start)
    template_of: str | None = None  # kiln-init in template mode, for this language

    # descriptors: a template's fork message writes them by position (template.fork_message)
    DESCRIPTORS = ("sock", "zygote", "recipe", "root_image", "cg_dirs", "cg_procs", "lower", "template_module")

    @staticmethod
    def variables(field: str) -> tuple[str, ...]:
        return LOWER_VARIABLES if field == "lower" else (f"KILN_{field.upper()}",)

    def environment(self) -> dict[str, str]:
        """The variables, each set field's; the cgroups' lists always (empty: none)."""
        env = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name == "lower":
                env.update((name, str(fd)) for name, fd in zip(LOWER_VARIABLES, value, strict=False))
            elif isinstance(value, tuple):
                env[self.variables(field.name)[0]] = ",".join(map(str, value))
            elif value is not None:
                env[self.variables(field.name)[0]] = str(value)
        return env


def every_variable() -> tuple[str, ...]:
    """Every variable kiln-init's start may carry."""
    return (*(name for field in fields(Start) for name in Start.variables(field.name)), *FORKED_VARIABLES)


DESCRIPTOR_VARIABLES = frozenset(name for field in Start.DESCRIPTORS for name in Start.variables(field))
