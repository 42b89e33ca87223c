"""Answer Horovod's CMake questions about TensorFlow and PyTorch before its build, once each.

Horovod 0.28.1's ``FindPytorch.cmake`` starts a fresh interpreter importing torch for each of
its seven questions (version, CUDA, ROCm, include and library folders, libraries, C++ ABI) and
``FindTensorflow.cmake`` one importing TensorFlow, one after another before the first compile:
about 16 CPU-s on 2 cores. This script rewrites each ``execute_process(COMMAND ${PY_EXE} -c
"CODE"`` of the two modules to read a file, then runs the same CODEs, in the same order, in one
interpreter per framework, the two side by side, writing what each printed to its file.

    python make/horovod_probes.py HOROVOD_SOURCE ANSWERS_DIR     (run by make/build-horovod.sh)

A question whose code fails leaves its answer empty, as CMake's own call would have.

>>> import tempfile
>>> modules = Path(tempfile.mkdtemp())
>>> _ = (modules / "FindDemo.cmake").write_text(
...     'execute_process(COMMAND ${PY_EXE} -c "print(6 * 7)"\\n    OUTPUT_VARIABLE V)\\n')
>>> codes = rewrite(modules / "FindDemo.cmake", modules, "demo")
>>> codes
['print(6 * 7)']
>>> (modules / "FindDemo.cmake").read_text().splitlines()[0] == (
...     f'execute_process(COMMAND cat "{modules}/demo-1.txt"')
True
>>> answer(codes, modules, "demo")
>>> (modules / "demo-1.txt").read_text()
'42\\n'
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

CALL = re.compile(r'execute_process\(COMMAND \$\{PY_EXE\} -c "([^"]*)"')
MODULES = {"tensorflow": "FindTensorflow.cmake", "pytorch": "FindPytorch.cmake"}
EXTENSION = "${Pytorch_EXT}"
"""The one CMake variable inside their codes: CUDAExtension where the CUDA or ROCm question
said True, else CppExtension (FindPytorch.cmake's own rule)."""
GPU_QUESTIONS = slice(1, 3)
"""Where FindPytorch.cmake asks them: its second and third questions (CUDA, then ROCm)."""
NO_RUNTIME = re.compile(r"No (CUDA|ROCm) runtime[^\n]*\n?")


def rewrite(module: Path, answers: Path, framework: str) -> list[str]:
    """Point each Python call of ``module`` at its answer file; the codes, in order."""
    codes: list[str] = []

    def to_file(call: re.Match[str]) -> str:
        codes.append(call.group(1))
        return f'execute_process(COMMAND cat "{answers}/{framework}-{len(codes)}.txt"'

    text = CALL.sub(to_file, module.read_text())
    if "${PY_EXE}" in text:
        raise SystemExit(f"{module}: a Python call this script does not recognise is left")
    module.write_text(text)
    return codes


def answer(codes: list[str], answers: Path, framework: str) -> None:
    """Run the codes in this interpreter, each with what it prints captured, as CMake would."""
    printed: list[str] = []
    for number, code in enumerate(codes, start=1):
        if EXTENSION in code:
            gpu = any(NO_RUNTIME.sub("", text).strip().upper() == "TRUE" for text in printed[GPU_QUESTIONS])
            code = code.replace(EXTENSION, "CUDAExtension" if gpu else "CppExtension")
        if "${" in code:
            raise SystemExit(f"{framework} question {number} needs a CMake variable: {code}")
        captured = io.StringIO()
        saved = sys.stdout, sys.stderr, sys.__stdout__
        sys.stdout = sys.__stdout__ = captured   # (some codes print to sys.__stdout__)
        try:
            exec(code, {"__name__": "__main__"})
        except Exception as error:   # noqa: BLE001 - CMake's call would have printed nothing
            print(f"horovod probe: {framework} question {number} failed: {error}", file=saved[1])
        finally:
            sys.stdout, sys.stderr, sys.__stdout__ = saved
        printed.append(captured.getvalue())
        (answers / f"{framework}-{number}.txt").write_text(printed[-1])


def main(source: Path, answers: Path) -> None:
    answers.mkdir(parents=True, exist_ok=True)
    children = []
    for framework, name in MODULES.items():
        codes = rewrite(source / "cmake" / "Modules" / name, answers, framework)
        children.append(subprocess.Popen([sys.executable, __file__, "--answer", framework,
                                          str(answers), json.dumps(codes)]))
    failed = [child.args[2] for child in children if child.wait() != 0]
    if failed:
        raise SystemExit(f"horovod probe: the {' and '.join(failed)} questions failed")


if __name__ == "__main__":
    if sys.argv[1] == "--answer":
        answer(json.loads(sys.argv[4]), Path(sys.argv[3]), sys.argv[2])
    else:
        main(Path(sys.argv[1]), Path(sys.argv[2]))
