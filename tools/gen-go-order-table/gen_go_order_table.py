#!/usr/bin/env python3
"""Generate the Go struct table used by the pod-template hash.

Argo Rollouts hashes `json.Marshal(corev1.PodTemplateSpec)`, so the bytes depend on the
Go declaration order of every struct reachable from PodTemplateSpec, on the `omitempty`
flags, and on the Go kinds of the fields. This script reads those declarations from the
Go sources of k8s.io/api and k8s.io/apimachinery and writes them as a Rust table.

Usage:
    gen_go_order_table.py --api DIR --apimachinery DIR [--version TEXT] [--out FILE]

DIR are the roots of the k8s.io/api and k8s.io/apimachinery modules (for instance the
unpacked Debian source packages golang-k8s-api and golang-k8s-apimachinery). Without
--out the table is written to stdout. rustfmt is applied to the output when available.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

ROOT_TYPE = ("core/v1", "PodTemplateSpec")

# Packages the walk may enter: import path suffix -> directory relative to a module root.
PACKAGES = {
    "core/v1": ("api", "core/v1"),
    "meta/v1": ("apimachinery", "pkg/apis/meta/v1"),
    "types": ("apimachinery", "pkg/types"),
}

# Import paths as written in the Go files -> package keys above.
IMPORTS = {
    "k8s.io/api/core/v1": "core/v1",
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta/v1",
    "k8s.io/apimachinery/pkg/types": "types",
    "k8s.io/apimachinery/pkg/api/resource": "resource",
    "k8s.io/apimachinery/pkg/util/intstr": "intstr",
}

# Types whose JSON form comes from a custom MarshalJSON; the Rust encoder implements each.
SPECIAL = {
    ("resource", "Quantity"): "Quantity",
    ("intstr", "IntOrString"): "IntOrString",
    ("meta/v1", "Time"): "Time",
    ("meta/v1", "FieldsV1"): "RawJson",
}

# Go basic kinds the Rust encoder supports (Scalar variants). Other kinds (floats, small
# or unsigned integers, []byte) are not reachable from PodTemplateSpec; the walk stops with
# an error if that ever changes.
SCALARS = {
    "string": "Str",
    "bool": "Bool",
    "int32": "I32",
    "int64": "I64",
}
UNSUPPORTED_KINDS = re.compile(
    r"^(u?int(8|16)?|uint(32|64)|uintptr|float(32|64)|complex(64|128)|byte|rune)$"
)


class GenError(Exception):
    pass


def strip_comments(src):
    """Remove // and /* */ comments, leaving strings and backtick literals intact."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "`":
            j = src.index("`", i + 1)
            out.append(src[i : j + 1])
            i = j + 1
        elif c in "\"'":
            j = i + 1
            while src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i : j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            i = src.index("*/", i + 2) + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def go_files(directory):
    for name in sorted(os.listdir(directory)):
        if name.endswith(".go") and not name.endswith("_test.go"):
            yield os.path.join(directory, name)


def parse_imports(src):
    aliases = {}
    for block in re.findall(r"^import\s*\((.*?)^\)", src, re.S | re.M):
        for line in block.splitlines():
            m = re.match(r'\s*(?:([A-Za-z_][A-Za-z0-9_]*)\s+)?"([^"]+)"', line)
            if m:
                path = m.group(2)
                aliases[m.group(1) or path.rsplit("/", 1)[-1]] = path
    single = r'^import\s+(?:([A-Za-z_][A-Za-z0-9_]*)\s+)?"([^"]+)"'
    for alias, path in re.findall(single, src, re.M):
        aliases[alias or path.rsplit("/", 1)[-1]] = path
    return aliases


def matching_brace(src, start):
    depth = 0
    i = start
    while i < len(src):
        if src[i] == "{":
            depth += 1
        elif src[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        elif src[i] == "`":
            i = src.index("`", i + 1)
        i += 1
    raise GenError("unbalanced braces")


MARSHALER_METHOD = re.compile(
    r"^func\s*\(\s*\w*\s*\*?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*(MarshalJSON|MarshalText)\s*\(",
    re.M,
)


class Package:
    def __init__(self, directory):
        self.structs = {}  # name -> (body, aliases)
        self.named = {}  # name -> (type expr, aliases)
        self.marshalers = set()
        for path in go_files(directory):
            with open(path, encoding="utf-8") as f:
                src = strip_comments(f.read())
            aliases = parse_imports(src)
            self._collect(src, aliases)

    def _collect(self, src, aliases):
        for m in re.finditer(r"^type\s+([A-Za-z_][A-Za-z0-9_]*)\s+(=\s*)?(.*)$", src, re.M):
            name, rhs = m.group(1), m.group(3).strip()
            if rhs.startswith("struct"):
                brace = src.index("{", m.start(3))
                end = matching_brace(src, brace)
                self.structs[name] = (src[brace + 1 : end], aliases)
            elif rhs.startswith("interface"):
                continue
            else:
                self.named[name] = (rhs, aliases)
        for m in MARSHALER_METHOD.finditer(src):
            self.marshalers.add(m.group(1))


def parse_tag(tag):
    """(json name, omitempty, omitzero) of a struct tag. `omitzero` (k8s.io/apimachinery
    v0.34 and later, on `creationTimestamp`) is recorded apart from `omitempty`: the encoder
    honours it for the current hash and ignores it for the hash of encoders that predate it."""
    m = re.search(r'json:"([^"]*)"', tag or "")
    if not m:
        return None, False, False
    parts = m.group(1).split(",")
    if "string" in parts[1:]:
        raise GenError("the json ',string' option is not supported: " + tag)
    return parts[0], "omitempty" in parts[1:], "omitzero" in parts[1:]


def split_fields(body):
    """Yield (names, type expr, tag) for every field line of a struct body."""
    for raw in body.splitlines():
        line = raw.strip()
        if not line:
            continue
        tag = None
        tm = re.search(r"`([^`]*)`\s*$", line)
        if tm:
            tag = tm.group(1)
            line = line[: tm.start()].strip()
        if "struct {" in line or "struct{" in line:
            raise GenError("anonymous struct fields are not supported: " + raw.strip())
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s+(\S.*)$", line)
        if m and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_]", line):
            names = [n.strip() for n in m.group(1).split(",")]
            yield names, m.group(2).strip(), tag
        else:
            yield None, line, tag


class Generator:
    def __init__(self, api_dir, machinery_dir):
        roots = {"api": api_dir, "apimachinery": machinery_dir}
        self.packages = {}
        for key, (module, rel) in PACKAGES.items():
            directory = os.path.join(roots[module], rel)
            if not os.path.isdir(directory):
                raise GenError("missing Go package directory: " + directory)
            self.packages[key] = Package(directory)
        self.structs = {}  # (pkg, name) -> list of fields, filled by walk
        self.order = []

    # ---- type expressions -------------------------------------------------------------

    def resolve(self, expr, pkg, aliases, seen=()):
        """Turn a Go type expression into a nested tuple describing its JSON shape."""
        expr = expr.strip()
        if expr.startswith("*"):
            return ("Ptr", self.resolve(expr[1:], pkg, aliases, seen))
        if expr == "[]byte" or UNSUPPORTED_KINDS.match(expr):
            raise GenError("%s fields are not supported by the encoder" % expr)
        if expr.startswith("[]"):
            return ("Slice", self.resolve(expr[2:], pkg, aliases, seen))
        if expr.startswith("map["):
            depth, i = 0, 3
            while True:
                if expr[i] == "[":
                    depth += 1
                elif expr[i] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            key = self.resolve(expr[4:i], pkg, aliases, seen)
            if key != ("Scalar", "Str"):
                raise GenError("map keys other than strings are not supported: " + expr)
            return ("Map", self.resolve(expr[i + 1 :], pkg, aliases, seen))
        if expr in SCALARS:
            return ("Scalar", SCALARS[expr])
        if "." in expr:
            alias, name = expr.split(".", 1)
            path = aliases.get(alias)
            if path not in IMPORTS:
                raise GenError("type from an unknown package: %s (%s)" % (expr, path))
            return self.named_type(IMPORTS[path], name, seen)
        return self.named_type(pkg, expr, seen)

    def named_type(self, pkg, name, seen):
        if (pkg, name) in SPECIAL:
            return ("Special", SPECIAL[(pkg, name)])
        if (pkg, name) in seen:
            raise GenError("cyclic named type: %s.%s" % (pkg, name))
        package = self.packages.get(pkg)
        if package is None:
            raise GenError("type from a package outside the walk: %s.%s" % (pkg, name))
        if name in package.marshalers:
            raise GenError("%s.%s has a custom JSON marshaler and no special case" % (pkg, name))
        if name in package.structs:
            return ("Struct", (pkg, name))
        if name in package.named:
            rhs, aliases = package.named[name]
            return self.resolve(rhs, pkg, aliases, seen + ((pkg, name),))
        raise GenError("unknown type %s.%s" % (pkg, name))

    # ---- structs ------------------------------------------------------------------------

    def raw_fields(self, pkg, name, depth, index):
        """Fields of a struct with embedded structs expanded, as Go's encoding/json sees them."""
        body, aliases = self.packages[pkg].structs[name]
        result = []
        position = 0
        for names, expr, tag in split_fields(body):
            json_name, omitempty, omitzero = parse_tag(tag)
            if json_name == "-" and tag and re.search(r'json:"-"', tag):
                position += len(names or [None])
                continue
            if names is None:
                # Embedded field: its type name is the Go field name.
                go_name = expr.lstrip("*").split(".")[-1]
                if not go_name[0].isupper():
                    raise GenError("embedded unexported types are not supported: " + expr)
                shape = self.resolve(expr, pkg, aliases)
                if not json_name and shape[0] == "Struct":
                    inner_pkg, inner_name = shape[1]
                    result.extend(
                        self.raw_fields(inner_pkg, inner_name, depth + 1, index + (position,))
                    )
                elif not json_name and shape[0] == "Ptr" and shape[1][0] == "Struct":
                    raise GenError("embedded struct pointers are not supported: " + expr)
                else:
                    result.append(
                        dict(
                            json=json_name or go_name,
                            omitempty=omitempty,
                            omitzero=omitzero,
                            shape=shape,
                            depth=depth,
                            tagged=bool(json_name),
                            index=index + (position,),
                        )
                    )
                position += 1
                continue
            for go_name in names:
                if go_name[0].isupper():
                    result.append(
                        dict(
                            json=json_name or go_name,
                            omitempty=omitempty,
                            omitzero=omitzero,
                            shape=self.resolve(expr, pkg, aliases),
                            depth=depth,
                            tagged=bool(json_name),
                            index=index + (position,),
                        )
                    )
                position += 1
        return result

    def fields(self, pkg, name):
        """Apply Go's rules for duplicate names: the shallowest field wins, a tag breaks ties."""
        raw = self.raw_fields(pkg, name, 0, ())
        by_name = {}
        for f in raw:
            by_name.setdefault(f["json"], []).append(f)
        kept = []
        for f in raw:
            rivals = by_name[f["json"]]
            shallowest = min(r["depth"] for r in rivals)
            dominant = [r for r in rivals if r["depth"] == shallowest]
            if len(dominant) > 1:
                tagged = [r for r in dominant if r["tagged"]]
                dominant = tagged if len(tagged) == 1 else []
            if dominant and dominant[0] is f:
                kept.append(f)
        kept.sort(key=lambda f: f["index"])
        return kept

    def walk(self):
        pending = [ROOT_TYPE]
        while pending:
            key = pending.pop(0)
            if key in self.structs:
                continue
            self.order.append(key)
            fields = self.fields(*key)
            self.structs[key] = fields
            for f in fields:
                pending.extend(struct_refs(f["shape"]))


def struct_refs(shape):
    if shape[0] == "Struct":
        return [shape[1]]
    if shape[0] in ("Ptr", "Slice", "Map"):
        return struct_refs(shape[1])
    return []


# ---- Rust output ------------------------------------------------------------------------


def static_name(key):
    pkg, name = key
    prefix = {"core/v1": "CORE_V1", "meta/v1": "META_V1"}[pkg]
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).upper()
    return prefix + "_" + snake


def rust_shape(shape):
    kind = shape[0]
    if kind == "Scalar":
        return "Ty::Scalar(%s)" % shape[1]
    if kind == "Special":
        return "Ty::%s" % shape[1]
    if kind == "Struct":
        return "Ty::Struct(&%s)" % static_name(shape[1])
    return "Ty::%s(&%s)" % (kind, rust_shape(shape[1]))


def scalars_used(gen):
    used = set()

    def visit(shape):
        if shape[0] == "Scalar":
            used.add(shape[1])
        elif shape[0] in ("Ptr", "Slice", "Map"):
            visit(shape[1])

    for fields in gen.structs.values():
        for f in fields:
            visit(f["shape"])
    return used


def go_path(key):
    pkg, name = key
    return {"core/v1": "k8s.io/api/core/v1", "meta/v1": "k8s.io/apimachinery/pkg/apis/meta/v1"}[
        pkg
    ] + "." + name


def render_body(gen, version):
    lines = [
        "use super::table::{Field, StructDef, Ty};",
        "use super::table::Scalar::{%s};" % ", ".join(sorted(scalars_used(gen))),
        "",
        "/// Go module versions the table was generated from.",
        "#[cfg(test)]",
        "pub const SOURCE_VERSION: &str = %s;" % rust_str(version),
        "",
        "/// `PodTemplateSpec`, the root of the hashed value.",
        "pub static ROOT: &StructDef = &%s;" % static_name(ROOT_TYPE),
        "",
        "/// Every struct reachable from the root, in walk order.",
        "#[cfg(test)]",
        "pub static ALL: &[&StructDef] = &[",
    ]
    lines += ["    &%s," % static_name(key) for key in gen.order]
    lines += ["];", ""]
    for key in gen.order:
        lines.append("pub static %s: StructDef = StructDef {" % static_name(key))
        lines.append("    go_name: %s," % rust_str(go_path(key)))
        lines.append("    fields: &[")
        for f in gen.structs[key]:
            if f["omitzero"]:
                if not f["omitempty"] or f["shape"] != ("Special", "Time"):
                    raise GenError("omitzero is modelled only with omitempty on a Time: " + f["json"])
                constructor = "omitempty_omitzero"
            else:
                constructor = "omitempty" if f["omitempty"] else "always"
            args = (constructor, rust_str(f["json"]), rust_shape(f["shape"]))
            lines.append("        Field::%s(%s, %s)," % args)
        lines.append("    ],")
        lines.append("};")
        lines.append("")
    return "\n".join(lines)


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rustfmt(text):
    exe = shutil.which("rustfmt")
    if exe is None:
        raise GenError("rustfmt is required to format the generated table")
    done = subprocess.run(
        [exe, "--edition", "2024", "--emit", "stdout"],
        input=text.encode(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        check=False,
    )
    if done.returncode != 0:
        raise GenError("rustfmt failed: " + done.stderr.decode())
    return done.stdout.decode()


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


BODY_MARKER = "// ---- generated table ----\n"


def render(gen, version):
    body = rustfmt(render_body(gen, version))
    header = (
        "// @generated by tools/gen-go-order-table/gen_go_order_table.py; do not edit.\n"
        "//\n"
        "// Go declaration order, json names and omitempty flags of every struct reachable from\n"
        "// corev1.PodTemplateSpec.\n"
        "// Source: %s\n"
        "//\n"
        "// Regenerate with:\n"
        "//   python3 tools/gen-go-order-table/gen_go_order_table.py \\\n"
        "//     --api <k8s.io/api source> --apimachinery <k8s.io/apimachinery source> \\\n"
        "//     --version '<source description>' \\\n"
        "//     --out crates/api/src/pod_template_hash/go_types.rs\n"
        "// The checksum covers everything below the marker line.\n"
        "// table-checksum: fnv1a64:%016x\n" % (version, fnv1a64(body.encode()))
    )
    return header + BODY_MARKER + body


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", required=True, help="root of the k8s.io/api sources")
    parser.add_argument(
        "--apimachinery", required=True, help="root of the k8s.io/apimachinery sources"
    )
    parser.add_argument("--version", default="k8s.io/api (unknown version)")
    parser.add_argument("--out", help="output file (default: stdout)")
    args = parser.parse_args()
    try:
        gen = Generator(args.api, args.apimachinery)
        gen.walk()
        text = render(gen, args.version)
    except GenError as e:
        print("error: " + str(e), file=sys.stderr)
        return 1
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
