// Conversions between Python values and the engine's types for the h3engine module: Status → the Python
// exception a caller expects (ValueError naming the field, FileNotFoundError, MemoryError,
// h3engine.Cancelled, RuntimeError), image arguments (a file path or a uint8 [H, W, 3] array) →
// io::DecodedImage, host tensors → numpy arrays, JSON → Python objects.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "io/image_reader.h"

#include <nlohmann/json.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

namespace h3::python {

namespace py = pybind11;

// Creates h3engine.Cancelled (a RuntimeError) in the module; call once at import.
void register_exceptions(py::module_& m);

// Raises the Python exception for a failed status. `field`: the request field it is about (ValueError's
// `field` attribute); empty: the status's own Status::field.
[[noreturn]] void raise_status(const Status& status, const std::string& field = {});

// A keyframe argument: a path (str or os.PathLike) read through io::read_image, or a C-contiguous-able uint8
// array [H, W, 3] (RGB). `field` names the argument in errors.
io::DecodedImage image_argument(const py::handle& value, const std::string& field);

// A path argument (str or os.PathLike) as a string; ValueError naming `field` otherwise.
std::string path_argument(const py::handle& value, const std::string& field);

// A host tensor (u8 or f32, contiguous) copied into a new numpy array of its shape.
py::array tensor_to_numpy(const Tensor& t);

py::object json_to_python(const nlohmann::json& j);
// A Python object (str, dict, list, numbers, bool, None) as JSON (the `cache` argument).
nlohmann::json python_to_json(const py::handle& value, const std::string& field);

} // namespace h3::python
