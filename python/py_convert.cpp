#include "py_convert.h"

#include <cstring>

namespace h3::python {

namespace {

PyObject* g_cancelled = nullptr; // h3engine.Cancelled

[[noreturn]] void raise_with_field(PyObject* type, const std::string& message, const std::string& field) {
    py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", message.c_str()));
    if (!exc) throw py::error_already_set();
    exc.attr("field") = field.empty() ? py::object(py::none()) : py::object(py::str(field));
    PyErr_SetObject(type, exc.ptr());
    throw py::error_already_set();
}

} // namespace

void register_exceptions(py::module_& m) {
    static py::exception<std::runtime_error> cancelled(m, "Cancelled", PyExc_RuntimeError);
    cancelled.doc() = "The generation was cancelled (Engine.cancel() or a progress callback that raised).";
    g_cancelled = cancelled.ptr();
}

void raise_status(const Status& status, const std::string& field_given) {
    const std::string& msg = status.message();
    const std::string field = field_given.empty() ? status.field() : field_given;
    switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kBadInput:
        raise_with_field(PyExc_ValueError, msg, field);
    case ErrorCode::kNotFound:
        raise_with_field(PyExc_FileNotFoundError, msg, field);
    case ErrorCode::kIoError:
        raise_with_field(PyExc_OSError, msg, field);
    case ErrorCode::kOutOfMemory:
        raise_with_field(PyExc_MemoryError, msg, field);
    case ErrorCode::kCancelled:
        raise_with_field(g_cancelled ? g_cancelled : PyExc_RuntimeError, msg, field);
    default:
        raise_with_field(PyExc_RuntimeError, msg, field);
    }
}

std::string path_argument(const py::handle& value, const std::string& field) {
    if (py::isinstance<py::str>(value)) return value.cast<std::string>();
    if (py::hasattr(value, "__fspath__")) return py::str(value.attr("__fspath__")()).cast<std::string>();
    raise_status(invalid_argument(field + ": expected a file path, got " +
                                  py::str(py::type::of(value).attr("__name__")).cast<std::string>()),
                 field);
}

io::DecodedImage image_argument(const py::handle& value, const std::string& field) {
    if (py::isinstance<py::array>(value)) {
        auto a = py::array::ensure(value);
        if (!a || a.dtype().kind() != 'u' || a.itemsize() != 1 || a.ndim() != 3 || a.shape(2) != 3 ||
            a.shape(0) < 1 || a.shape(1) < 1)
            raise_status(invalid_argument(field + ": an image array must be uint8 [H, W, 3] (RGB)"), field);
        auto c = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(a);
        io::DecodedImage d;
        d.image = io::RgbImage(static_cast<int>(c.shape(1)), static_cast<int>(c.shape(0)));
        std::memcpy(d.image.pixels.data(), c.data(), d.image.pixels.size());
        d.source_mode = "RGB";
        d.stored_width = d.image.width;
        d.stored_height = d.image.height;
        return d;
    }
    const std::string path = path_argument(value, field);
    auto im = io::read_image(path);
    if (!im.ok()) raise_status(im.status().with_context(field), field);
    return std::move(im).value();
}

py::array tensor_to_numpy(const Tensor& t) {
    if (!t.defined()) return py::array();
    if (!t.device().is_cpu() || !t.is_contiguous())
        raise_status(internal_error("h3engine: result tensor is not a contiguous host tensor"));
    const std::vector<int64_t> dims = t.shape().to_vector();
    const std::vector<py::ssize_t> shape(dims.begin(), dims.end());
    if (t.dtype() == DType::kU8) {
        py::array_t<uint8_t> a(shape);
        std::memcpy(a.mutable_data(), t.data(), t.nbytes());
        return a;
    }
    if (t.dtype() == DType::kF32) {
        py::array_t<float> a(shape);
        std::memcpy(a.mutable_data(), t.data(), t.nbytes());
        return a;
    }
    raise_status(internal_error("h3engine: result tensor has an unexpected dtype"));
}

py::object json_to_python(const nlohmann::json& j) {
    return py::module_::import("json").attr("loads")(j.dump());
}

nlohmann::json python_to_json(const py::handle& value, const std::string& field) {
    if (py::isinstance<py::str>(value)) return nlohmann::json(value.cast<std::string>());
    try {
        const std::string text = py::module_::import("json").attr("dumps")(value).cast<std::string>();
        return nlohmann::json::parse(text);
    } catch (const py::error_already_set&) {
        raise_status(invalid_argument(field + ": expected a spec string or a JSON-like dict"), field);
    }
}

} // namespace h3::python
