"""The one rule for text on the page (ui.markdown): every string a page puts where Streamlit reads Markdown is our own
words and numbers, or passes through `literal` (or `errors.shown`, which ends in it) first."""

from __future__ import annotations

import ast
from pathlib import Path

from page_text import shown_text

from ui.markdown import literal

ROOT = Path(__file__).resolve().parents[1]
PAGE_FILES = [ROOT / "app.py", *sorted((ROOT / "ui").rglob("*.py")), *sorted((ROOT / "views").rglob("*.py"))]

# Streamlit 1.67 calls whose first argument it shows as Markdown: a message, a heading, a label.
FIRST_ARGUMENT = {"markdown", "caption", "info", "warning", "error", "success", "toast", "title", "header", "subheader"}
FIRST_ARGUMENT |= {"write", "badge", "metric", "expander", "popover", "status", "tabs", "form_submit_button"}
FIRST_ARGUMENT |= {"button", "download_button", "link_button", "checkbox", "toggle", "radio", "selectbox", "pills"}
FIRST_ARGUMENT |= {"multiselect", "select_slider", "slider", "text_input", "text_area", "number_input", "feedback"}
FIRST_ARGUMENT |= {
    "spinner",
    "file_uploader",
    "camera_input",
    "audio_input",
    "color_picker",
    "date_input",
    "time_input",
}
KEYWORDS = {"label", "help", "caption", "captions", "body"}  # help= is Markdown in every call that takes it
KEYWORDS_OF = {"progress": {"text"}}  # st.progress(value, text=…)
NOT_STREAMLIT = {"log", "logging", "warnings", "decl"}  # their .info/.error/.write are logs and URL writers
HELPERS = {"literal", "shown"}  # ui.markdown.literal, and ui.errors.shown, which ends in it
NUMBERS = {"len", "int", "round", "sum", "min", "max", "slider", "number_input"}  # st.slider: over numbers here
CONFIG = {"config", "cfg"}  # model.config.Config checks every field on load: numbers, and names from its fixed lists
SAME_TEXT = {"get", "upper", "lower", "capitalize", "strip"}  # d.get(key, default), "csv".upper(): no new text
CHOICES = {"selectbox", "radio", "pills", "segmented_control", "select_slider"}  # return one of their options
LOOPS = {"enumerate", "zip", "reversed", "sorted"}  # a loop over these goes over their arguments' items
NUMBER_FORMATS = set("bdeEfFgGnoxX%,")  # a format spec ending so takes numbers only

# Our functions whose text is our own words and numbers (Markdown on purpose, some of it).
OWN_MARKDOWN = {
    "window_note": "viz.attention_math: which keys the chart shows, as numbers",
    "reduced_note": "viz.masks: the shape of a mask drawn smaller, as numbers",
    "padding_note": "viz.masks: how many pads each sentence got, as numbers",
    "growth_sentence": "analysis: how a measured time grows with the length, as numbers",
    "findings": "views/experiment.py: the table's findings, bold on purpose, numbers and the catalog's model names",
    "pruning_finding": "views/experiment.py: one model's pruning curve, bold on purpose, as numbers",
    "trace_uploader": "ui.widgets: why a file could not be opened, already through errors.shown",
    "head_label": "views/lesson_steps/induction.py: `layer 2, head 1`, from a sub-layer's number",
    "activation_name": "views/lesson_steps/paper.py: the config's activation (checked on load), in our words",
    "norm_name": "views/lesson_steps/paper.py: the config's normalisation (checked on load), in our words",
    "urlencode": "a link's query, percent-encoded: letters, digits and %+&=._-~ only",
    "headline": "inference.catalog: how good the model is, in our words and the card's numbers (read as floats)",
    "label": "ui/reference.py: the reference box's label, one of three fixed phrases",
    "_choices_line": "ui/class_live.py: a question's choices, each through literal, or the grid's two numbers",
}
# Computed text that is Markdown on purpose, or escaped where it was made: (file, part) → why.
ALLOWED = {
    ("views/lesson.py", "step.text"): "course/lesson.py: the lesson's own paragraphs, Markdown on purpose",
    ("views/lesson.py", "step.title"): "course/lesson.py: the lesson's own step titles",
    ("views/lesson.py", "LOOK"): "views/lesson_steps/layout.py: each step's own sentence, what to look at",
    ("ui/sidebar.py", "st.session_state"): ("why the sidebar chose nothing, made by errors.shown where it was found"),
}


class Scope:
    """What a name in a function may hold: the parameters and assignments of it and the functions around it, the
    module's constants; `owner` names the function each parameter belongs to."""

    def __init__(self, module: dict[str, list[ast.expr | None]], funcs: list[ast.FunctionDef]) -> None:
        self.values = dict(module)
        self.owner: dict[str, tuple[str, int]] = {}  # parameter → (its function, its position)
        for func in funcs:  # the outermost first: an inner name hides an outer one
            args = func.args
            params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
            for name in params:
                self.values.pop(name, None)
            self.owner.update({name: (func.name, i) for i, name in enumerate(params)})
            for name, values in _assignments(func.body).items():
                self.values[name] = values
                self.owner.pop(name, None)


def _assignments(body: list[ast.stmt]) -> dict[str, list[ast.expr | None]]:
    """Each name assigned in `body` → every value given to it (None: a loop or `with` variable, not known)."""
    found: dict[str, list[ast.expr | None]] = {}
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                _bind(target, [node.value], found)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.For, ast.comprehension)):  # a loop variable holds an item of what it goes over
            _bind(node.target, _items(node.iter), found)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            for name in ast.walk(node.optional_vars):
                if isinstance(name, ast.Name):
                    found.setdefault(name.id, []).append(None)
    return found


def _items(over: ast.expr) -> list[ast.expr | None]:
    """What a loop over `over` may give: a literal's items, enumerate's (number, item) and zip's tuples; else
    `over` itself stands for its items (safe when all of it is)."""
    if isinstance(over, (ast.Tuple, ast.List)):
        return list(over.elts)
    if isinstance(over, ast.Call) and _call_name(over) == "enumerate" and over.args:
        return [ast.Tuple([ast.Constant(0), item]) for item in _items(over.args[0])]
    if isinstance(over, ast.Call) and _call_name(over) == "zip":
        return [ast.Tuple([ast.Tuple(_items(a)) if len(_items(a)) > 1 else _items(a)[0] for a in over.args])]
    return [over]


def _bind(target: ast.expr, values: list[ast.expr | None], found: dict[str, list[ast.expr | None]]) -> None:
    """Give each name in `target` its part of every value (a tuple unpacked item by item; None: not known)."""
    if isinstance(target, ast.Name):
        found.setdefault(target.id, []).extend(values)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for i, part in enumerate(target.elts):
            picked = [v.elts[i] if isinstance(v, ast.Tuple) and len(v.elts) == len(target.elts) else v for v in values]
            _bind(part, picked, found)


def _numeric(node: ast.expr) -> bool:
    """An expression that can only be a number: a number, len(…) and kin, or arithmetic with a number."""
    if isinstance(node, ast.Call) and _call_name(node) in NUMBERS:
        return True
    if isinstance(node, ast.Attribute) and any(
        isinstance(n, ast.Attribute) and n.attr in CONFIG for n in ast.walk(node)
    ):
        return True
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in CONFIG:
        return True
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Mod):
        return _numeric(node.left) or _numeric(node.right)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def leaks(node: ast.expr | None, scope: Scope, seen: frozenset[str] = frozenset()) -> set[str]:
    """What in `node` may be text from outside, unescaped: "param:NAME" for a parameter (its callers decide), else
    the source of the part. Empty: only our own words and numbers, or text through the helper."""
    if node is None or isinstance(node, ast.Constant) or _numeric(node):
        return set()
    if isinstance(node, ast.Call) and _call_name(node) in HELPERS | set(OWN_MARKDOWN):
        return set()
    if isinstance(node, ast.Call) and _call_name(node) in CHOICES:  # one of its options
        options = [kw.value for kw in node.keywords if kw.arg == "options"] or node.args[1:2]
        return leaks(options[0], scope, seen) if options else {ast.unparse(node)}
    if isinstance(node, ast.FormattedValue):
        spec = node.format_spec
        if spec is not None and all(isinstance(v, ast.Constant) for v in spec.values):
            if "".join(str(v.value) for v in spec.values)[-1:] in NUMBER_FORMATS:
                return set()
        return leaks(node.value, scope, seen)
    parts: list[ast.expr | None] = []
    if isinstance(node, ast.JoinedStr):
        parts = list(node.values)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = [node.left, node.right]
    elif isinstance(node, ast.IfExp):
        parts = [node.body, node.orelse]
    elif isinstance(node, ast.BoolOp):
        parts = list(node.values)
    elif isinstance(node, (ast.List, ast.Tuple)):
        parts = list(node.elts)
    elif isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        parts = [node.elt]
    elif isinstance(node, ast.Dict):
        parts = list(node.values)
    elif isinstance(node, ast.Subscript):  # an item of a collection of ours is ours
        parts = [node.value]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SAME_TEXT:
        parts = [node.func.value, *node.args[1:]]
    elif isinstance(node, ast.Name) and node.id in scope.values and node.id not in seen:
        values = scope.values[node.id]
        if None in values:
            return {node.id}
        return set().union(*(leaks(v, scope, seen | {node.id}) for v in values))
    elif isinstance(node, ast.Name) and node.id in scope.owner:
        return {f"param:{node.id}"}
    else:
        return {ast.unparse(node)}
    return set().union(set(), *(leaks(p, scope, seen) for p in parts))


def _markdown_arguments(call: ast.Call, wrappers: dict[str, dict[str, int]]) -> list[ast.expr]:
    """The arguments of `call` shown as Markdown: Streamlit's, and those our own wrappers hand on to Streamlit. A
    call of a chosen function, `(st.warning if cut else st.info)(note)`, is read as a call of each."""
    callees = [call.func.body, call.func.orelse] if isinstance(call.func, ast.IfExp) else [call.func]
    found: list[ast.expr] = []
    for func in callees:
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in NOT_STREAMLIT:
            continue
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        found += [kw.value for kw in call.keywords if kw.arg in KEYWORDS | KEYWORDS_OF.get(name, set())]
        if isinstance(func, ast.Attribute) and name in FIRST_ARGUMENT and call.args:
            found.append(call.args[0])
        for param, position in wrappers.get(name, {}).items():
            found += [kw.value for kw in call.keywords if kw.arg == param and kw.arg not in KEYWORDS]
            found += call.args[position : position + 1]
    return list({id(arg): arg for arg in found}.values())


def _calls(tree: ast.Module) -> list[tuple[list[ast.FunctionDef], ast.Call]]:
    """Every call in the module with the functions around it, the outermost first."""
    found = []

    def visit(node: ast.AST, funcs: list[ast.FunctionDef]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call):
                found.append((funcs, child))
            visit(child, [*funcs, child] if isinstance(child, ast.FunctionDef) else funcs)

    visit(tree, [])
    return found


def unchecked_text() -> list[str]:
    """`file:line: part` of each argument shown as Markdown that may hold text from outside, unescaped. A function
    that hands its parameter on to Streamlit is a wrapper: its callers' argument is checked instead."""
    modules = []
    for path in PAGE_FILES:
        source = path.read_text()
        tree = ast.parse(source)
        constants = _assignments([s for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign))])
        modules.append((path.relative_to(ROOT).as_posix(), constants, _calls(tree)))
    wrappers: dict[str, dict[str, int]] = {}
    for _ in range(4):  # wrappers of wrappers
        problems = []
        for where, constants, calls in modules:
            for funcs, call in calls:
                scope = Scope(constants, funcs)
                for arg in _markdown_arguments(call, wrappers):
                    for leak in sorted(leaks(arg, scope)):
                        if leak.startswith("param:"):
                            param = leak.removeprefix("param:")
                            func, position = scope.owner[param]
                            wrappers.setdefault(func, {})[param] = position
                        elif (where, leak) not in ALLOWED:
                            problems.append(f"{where}:{arg.lineno}: {leak}")
    return problems


def test_every_string_streamlit_reads_as_markdown_is_ours_or_passes_through_literal() -> None:
    problems = unchecked_text()
    assert not problems, "pass these through ui.markdown.literal (or name the builder in OWN_MARKDOWN):\n" + "\n".join(
        problems
    )


def test_text_from_outside_is_escaped_so_markdown_shows_it_letter_for_letter() -> None:
    hostile = "![e](http://h/e.png) <http://h> *b* _i_ `c` ~s~ $x$ &lt; a|b :red[x] :smile: :material/home: x@y.z"
    hostile += " www.h.org\n# h\n- l\n12. n\n> q\n==="
    escaped = literal(hostile)
    expected = (
        "!\\[e\\](http\u2060\\://h/e.png) \\<http\u2060\\://h\\> \\*b\\* \\_i\\_ \\`c\\` \\~s\\~ \\$x\\$ \\&lt; a\\|b "
        "\\:red\\[x\\] \\:smile\\: \\:material\\/home\\: x\u2060@y.z www\u2060.h.org"
        "\n\\# h\n\\- l\n12\\. n\n\\> q\n\\==="
    )  # \u2060: the word joiner that keeps a bare link from being a link
    assert escaped == expected
    assert shown_text(escaped) == hostile, "the reader sees every letter of the original"
    assert literal("b-bad-weights/model.safetensors (ok)") == "b-bad-weights/model.safetensors (ok)"
    assert literal(3) == "3"
