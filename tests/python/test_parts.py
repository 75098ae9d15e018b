"""The rules that make an embedded program of several files one coherent program (see
ARCHITECTURE.md, "Python in src/"): the binary concatenates the parts, so they share one
namespace."""

import ast
import unittest

import programs

# The parts whose top level may run code as `__main__`: the helper's last part; the
# zygote's first (the path fix, before any other import) and last; the binding's last.
RUNNERS = {"helper": {"main.py"}, "zygote": {"start.py", "serve.py"}, "bind": {"main.py"}}


def is_main_guard(node):
    test = node.test
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        test = test.values[0]
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def is_declaration(node):
    return isinstance(node.test, ast.Constant) and node.test.value is False


class PartsTest(unittest.TestCase):
    def trees(self, name):
        return [(path, ast.parse(path.read_text(), str(path))) for path in programs.parts(name)]

    def test_each_program_has_its_parts(self):
        for name in programs.PROGRAMS:
            with self.subTest(program=name):
                paths = programs.parts(name)
                self.assertGreater(len(paths), 1)
                self.assertEqual(len({p.stem for p in paths}), len(paths), "two parts, one name")
                for path in paths:
                    text = path.read_text()
                    # Concatenated: a part without a final newline would join the next.
                    self.assertTrue(text.endswith("\n"), f"{path.name} lacks a final newline")

    def test_no_name_is_defined_by_two_parts(self):
        for name in programs.PROGRAMS:
            owner = {}
            for path, tree in self.trees(name):
                for defined in programs.top_level_names(tree):
                    with self.subTest(program=name, name=defined):
                        self.assertNotIn(
                            defined, owner, f"{path.name} redefines {owner.get(defined)}'s"
                        )
                    owner[defined] = path.name

    def test_each_declared_name_is_defined_by_the_part_named(self):
        for name in programs.PROGRAMS:
            trees = self.trees(name)
            defined = {path.stem: programs.top_level_names(tree) for path, tree in trees}
            for path, tree in trees:
                for part, taken in programs.declared_names(tree):
                    with self.subTest(program=name, part=path.name, name=taken):
                        self.assertIn(part, defined, f"no part {part}.py")
                        self.assertNotEqual(part, path.stem)
                        self.assertIn(taken, defined[part], f"{part}.py does not define it")

    def test_only_the_runners_run_code_on_load(self):
        allowed = (
            ast.Import,
            ast.ImportFrom,
            ast.FunctionDef,
            ast.ClassDef,
            ast.Assign,
            ast.AnnAssign,
        )
        for name in programs.PROGRAMS:
            for path, tree in self.trees(name):
                for node in tree.body:
                    with self.subTest(program=name, part=path.name, line=node.lineno):
                        if isinstance(node, ast.If) and is_main_guard(node):
                            self.assertIn(path.name, RUNNERS[name])
                        elif isinstance(node, ast.If):
                            self.assertTrue(is_declaration(node), "an `if` at the top level")
                        elif isinstance(node, ast.Expr):
                            self.assertIsInstance(node.value, ast.Constant, "a call on load")
                        else:
                            self.assertIsInstance(node, allowed)

    def test_each_program_is_python_3_10(self):
        # The oldest Python conda 26.7 supports; ruff checks the rest (target-version).
        for name in programs.PROGRAMS:
            with self.subTest(program=name):
                ast.parse(programs.source(name), feature_version=(3, 10))

    def test_loading_runs_nothing(self):
        for name in programs.PROGRAMS:
            with self.subTest(program=name):
                module = programs.load(name)
                self.assertTrue(callable(module.main))


if __name__ == "__main__":
    unittest.main()
