"""Compiler diagnostics point at the line of the Python file the person edits, not only at kernel.cpp."""

from verifier.build.diagnostics import locate_in_file

CPP = "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) {\n    auto y = x\n    return y;\n}\n"
FILE = 'import torch\n\nCPP = r"""' + CPP + '"""\n'


def test_embedded_source_lines_map_to_file_lines():
    out = locate_in_file(["kernel.cpp:4: error: expected ';' before 'return'"], CPP, FILE)
    assert out == ["kernel.cpp:4: error: expected ';' before 'return' [file line 6]"]
    assert FILE.splitlines()[5].strip() == "return y;"


def test_a_source_not_found_verbatim_falls_back_to_unique_lines():
    escaped = FILE.replace('r"""', '"""')  # same lines, but the search for the whole source still works
    assert locate_in_file(["kernel.cpp:3: error: x"], CPP, escaped)[0].endswith("[file line 5]")
    joined = CPP.replace("\n", "\\n")  # one-line literal: nothing to place by text, lines stay as they are
    other_file = f'CPP = "{joined}"\n'
    assert locate_in_file(["kernel.cpp:3: error: x"], CPP, other_file) == ["kernel.cpp:3: error: x"]


def test_other_diagnostics_are_untouched():
    diags = ["link: error: undefined reference to `g'", "cuda_sources:7: error: bad"]
    assert locate_in_file(diags, CPP, FILE) == diags
