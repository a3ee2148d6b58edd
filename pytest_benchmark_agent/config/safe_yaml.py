"""Reading YAML safely: one loader for every file a user writes and every record read back,
refusing what must never be built (a duplicate key, an alias bomb, nesting past a depth, a
scalar that cannot be read), and a user's file read as bounded UTF-8 text with errors naming
its place.
"""

from __future__ import annotations

import errno
import math
from pathlib import Path
from typing import Any

import yaml

from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.util.fsutil import read_regular

#: libyaml's safe loader where PyYAML was built with it (several times faster), else PyYAML's.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: How deep a record may nest; libyaml's composer recurses on the C stack, and a document
#: nested ~25,000 deep (25 kB of ``[``) crashed the process, so deeper ones are refused first.
MAX_DEPTH = 2000


#: How deep a file a user writes may nest (a benchmark file nests about 6 deep): the records
#: of a run nest a few levels deeper than its config, and must stay writable and readable.
MAX_INPUT_DEPTH = 100


#: How many nodes aliases may add to a document: 30 lines of aliases (an alias bomb) expand
#: to billions of values once the config is validated or written.
MAX_ALIAS_NODES = 100_000


#: The largest benchmark, recipe or tuning file read; a bigger one is refused unread.
MAX_INPUT_BYTES = 16 << 20


class YamlLimitError(yaml.MarkedYAMLError):
    """A document refused before it is built: too deep, an alias bomb, a duplicate key..."""


class _Loader(SAFE_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader, refusing what a reader must never build: a duplicate key (the second
    silently won), a recursive alias, aliases expanding past :data:`MAX_ALIAS_NODES` or
    nesting past ``max_depth``; and a scalar its constructor cannot read (``2026-13-45``, a
    5,000-digit int) as a YAML error at its place instead of a ValueError."""

    max_depth = MAX_DEPTH
    aliases = True

    def construct_document(self, node: yaml.Node) -> Any:
        if self.aliases:
            _check_graph(node, self.max_depth)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            return super().construct_mapping(node, deep=deep)  # PyYAML's own error
        explicit = node.value
        self.flatten_mapping(node)  # ``<<: *base`` pairs first; the file's own keys after
        first = len(node.value) - len(explicit)
        mapping: dict[Any, Any] = {}
        for index, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=deep)
            try:
                seen = key in mapping
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                ) from None
            if seen and index > first:
                _refuse_duplicate(self, node.value[first:index], key, key_node)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _refuse_duplicate(loader: Any, earlier: list[Any], key: Any, key_node: yaml.Node) -> None:
    """Raise for ``key`` at ``key_node`` if the file wrote it before among ``earlier`` pairs
    (a key from a ``<<`` merge may be overridden: that is what merging is for)."""
    for other, _ in earlier:
        if loader.construct_object(other) == key:
            raise YamlLimitError(
                None,
                None,
                f"duplicate key {key!r}: first at line {other.start_mark.line + 1}, "
                f"again at line {key_node.start_mark.line + 1}",
                key_node.start_mark,
            )


def _marked(construct: Any) -> Any:
    """A scalar constructor whose ValueError (a date that does not exist, an int too long to
    convert) is a YAML error naming the scalar's place."""

    def checked(loader: Any, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, OverflowError) as error:
            raise YamlLimitError(
                None,
                None,
                f"cannot read {str(node.value)[:40]!r} ({str(error).split(';')[0]})",
                node.start_mark,
            ) from None

    return checked


for _tag in ("int", "timestamp"):  # what a plain scalar can make fail; a tag's error: below
    _Loader.add_constructor(
        f"tag:yaml.org,2002:{_tag}",
        _marked(yaml.constructor.SafeConstructor.yaml_constructors[f"tag:yaml.org,2002:{_tag}"]),
    )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def _check_graph(root: yaml.Node, max_depth: int) -> None:
    """Refuse a node graph that aliases make recursive, too big or too deep once expanded.

    Each node's expanded size and depth is computed once (iteratively: the graph may be
    deep), so a bomb is measured without being built.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, expanded depth)
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            parts = [sizes[id(child)] for child in _children(node)]
            size = 1 + sum(p[0] for p in parts)
            depth = 1 + max((p[1] for p in parts), default=0)
            sizes[key] = size, depth
            if size > len(sizes) + MAX_ALIAS_NODES:
                raise YamlLimitError(
                    None,
                    None,
                    f"aliases expand this value to over {MAX_ALIAS_NODES} values (an alias bomb)",
                    node.start_mark,
                )
            if depth > max_depth:
                raise YamlLimitError(
                    None, None, f"nests deeper than {max_depth} levels", node.start_mark
                )
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise YamlLimitError(
                    None, None, "an alias refers to a value that contains it", child.start_mark
                )
            if id(child) not in sizes:
                stack.append((child, False))


def _check_depth(text: str, max_depth: int) -> bool:
    """Refuse ``text`` nesting deeper than ``max_depth``, from the parser's events alone;
    whether it may hold an alias (a node graph to check).

    Each level of nesting takes a ``[``, ``{``, ``-`` or ``?``, or more indentation (a level
    of which costs a line as long as its depth): where those cannot add up to ``max_depth``,
    nothing is parsed twice, and a text with an ``&`` and a ``*`` may hold an alias.
    """
    bound = sum(text.count(c) for c in "[{-?") + math.isqrt(2 * len(text)) + 1
    if bound <= max_depth:
        return "&" in text and "*" in text
    parser = SAFE_LOADER(text)
    aliased = False
    try:
        depth = 0
        while not parser.check_event(yaml.StreamEndEvent):
            event = parser.get_event()
            if isinstance(event, yaml.AliasEvent):
                aliased = True
            elif isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise YamlLimitError(
                        None, None, f"nests deeper than {max_depth} levels", event.start_mark
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as error:
        # libyaml (0.2.5+) scans ahead and stops at its own nesting limit first: the same refusal
        if "maximum nesting depth" not in (error.problem or ""):
            raise
        raise YamlLimitError(
            None, None, f"nests deeper than {max_depth} levels", error.problem_mark
        ) from None
    finally:
        parser.dispose()
    return aliased


def parse_yaml(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse YAML as ``yaml.safe_load`` does (with libyaml when available), refusing with a
    ``yaml.YAMLError`` what :class:`_Loader` refuses and nesting past ``max_depth``."""
    aliased = _check_depth(text, max_depth)
    loader = _Loader(text)
    loader.max_depth = max_depth
    loader.aliases = aliased  # without an alias the graph is a tree, as deep as checked
    try:
        return loader.get_single_data()
    except (ValueError, OverflowError, RecursionError) as error:  # e.g. ``!!float abc``
        raise YamlLimitError(None, None, f"cannot read a value ({error})", None) from None
    finally:
        loader.dispose()


def yaml_problem(error: yaml.YAMLError, text: str = "") -> tuple[str, str]:
    """(where, what) of a YAML error: ``line 3, column 5`` and the problem, for messages."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is not None:
        where = f"line {mark.line + 1}, column {mark.column + 1}"
    elif isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text.count("\n", 0, error.position) + 1
        column = error.position - (text.rfind("\n", 0, error.position) + 1) + 1
        where = f"line {line}, column {column}"
        code = ord(error.character) if isinstance(error.character, str) else error.character
        return where, f"the character U+{code:04X} is not allowed in YAML"
    else:
        where = ""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    return where, f"{context}: {problem}" if context else problem


def read_input(path: Path, limit: int = MAX_INPUT_BYTES) -> str:
    """A file a user wrote, as text: a regular file (a FIFO or device is refused, never
    read), at most ``limit`` bytes, UTF-8. Raises ConfigError naming the path, or the line
    and byte offset of the first byte that is not UTF-8."""
    try:
        data = read_regular(path, limit)
    except OSError as error:
        fix = (
            "give a benchmark file of a sensible size."
            if error.errno == errno.EFBIG
            else "check the path."
        )
        raise ConfigError(path, [("", f"cannot be read: {error.strerror}.", fix)]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            path,
            [
                (
                    f"line {line}, byte offset {error.start}",
                    f"is not UTF-8 text (byte 0x{data[error.start]:02x}).",
                    "save the file as UTF-8.",
                )
            ],
        ) from None


def read_yaml_input(path: Path, limit: int = MAX_INPUT_BYTES) -> Any:
    """A YAML file a user wrote (:func:`read_input`), parsed at :data:`MAX_INPUT_DEPTH`;
    raises ConfigError naming the path, line and problem."""
    text = read_input(path, limit)
    try:
        return parse_yaml(text, MAX_INPUT_DEPTH)
    except yaml.YAMLError as error:
        where, problem = yaml_problem(error, text)
        raise ConfigError(
            path, [(where, f"not valid YAML ({problem}).", "correct the YAML at that place.")]
        ) from None


def parse_value(text: str, name: str = "") -> Any:
    """A value given on the command line (``--bench-set PARAM=VALUE``), read as YAML; raises
    ValueError saying why it is not (quoting the value unless it is a secret: a param ``name``
    named like one, or a value that looks like one)."""
    try:
        return parse_yaml(text, MAX_INPUT_DEPTH)
    except yaml.YAMLError as error:
        from pytest_benchmark_agent.util.redact import redact_value

        where, problem = yaml_problem(error, text)
        shown = redact_value(name, text[:80])
        raise ValueError(
            f"{shown!r} is not a valid YAML value ({problem}{', ' + where if where else ''})"
            "; quote a plain string, e.g. name='a: b'"
        ) from None
