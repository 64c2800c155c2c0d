"""Builds the h3engine extension with CMake (pyproject.toml says how to install it)."""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("H3_BUILD_DIR") or os.path.join(os.path.abspath(self.build_temp), "cmake")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            args = ["-DCMAKE_BUILD_TYPE=Release", "-DH3_BUILD_TESTS=OFF", "-DH3_BUILD_BENCH=OFF",
                    f"-DPython3_EXECUTABLE={sys.executable}"]
            args += shlex.split(os.environ.get("H3_CMAKE_ARGS", ""))
            subprocess.run(["cmake", "-S", ROOT, "-B", build] + args, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "--build", build, "--target", "h3engine", "-j", jobs], check=True)
        built = [f for f in os.listdir(os.path.join(build, "python")) if f.startswith("h3engine") and f.endswith(".so")]
        if len(built) != 1:
            raise RuntimeError(f"expected one h3engine*.so in {build}/python, found {built}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(build, "python", built[0]), dest)


setup(ext_modules=[Extension("h3engine", sources=[])], cmdclass={"build_ext": CMakeBuild})
