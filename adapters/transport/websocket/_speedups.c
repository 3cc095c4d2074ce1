/*
 * RFC 6455 masking in C: the optional accelerator of frames.py and runs.py.
 *
 * Python has no XOR of byte strings; the pure-Python paths XOR whole
 * batches as integers, and the conversions alone (bytes -> int -> bytes,
 * ~1.6 ns a byte) cost a 16-byte fire-and-forget's 28-byte frame ~90 ns at
 * each end: fire-and-forget over ws:// ran at 0.70-0.80x TCP
 * (benchmarks/bench_websocket.py --fnf-ends, docs/performance.md,
 * "Masking in C"). Built when a C compiler is there at install (setup.py:
 * optional); without it the pure-Python paths run, and the two give the
 * same bytes (tests/adapters/transport/test_websocket_c_masking.py).
 *
 * Each function checks its bounds and nothing else: the callers checked
 * the headers and lengths, as the pure-Python paths' callers do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* From this many bytes of output the GIL is released while the bytes are
 * written (a client's application thread runs beside its driver). */
#define RELEASE_GIL_FROM (64 * 1024)

/* dst[i] = src[i] ^ key[i % 4] for i < n (dst may be src). */
static void
xor_key(unsigned char *dst, const unsigned char *src, Py_ssize_t n, const unsigned char *key)
{
    uint32_t k4;
    uint64_t k8, v;
    Py_ssize_t i = 0;

    memcpy(&k4, key, 4);
    k8 = ((uint64_t)k4 << 32) | k4;
    for (; i + 8 <= n; i += 8) {
        memcpy(&v, src + i, 8);
        v ^= k8;
        memcpy(dst + i, &v, 8);
    }
    for (; i < n; i++) {
        dst[i] = src[i] ^ key[i & 3];
    }
}

/* A masked frame's header: 6 bytes under 126 payload bytes, else 8 (16-bit length). */
static Py_ssize_t
masked_head(Py_ssize_t n)
{
    return n < 126 ? 6 : 8;
}

PyDoc_STRVAR(mask_doc,
"mask(key, payload, /)\n--\n\n"
"payload XOR the 4-byte key repeated (masking and unmasking).");

static PyObject *
speedups_mask(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer key, payload;
    PyObject *out = NULL;

    if (!PyArg_ParseTuple(args, "y*y*:mask", &key, &payload)) {
        return NULL;
    }
    if (key.len != 4) {
        PyErr_SetString(PyExc_ValueError, "mask: the key must be 4 bytes");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, payload.len);
    if (out == NULL) {
        goto done;
    }
    if (payload.len >= RELEASE_GIL_FROM) {
        Py_BEGIN_ALLOW_THREADS
        xor_key((unsigned char *)PyBytes_AS_STRING(out), payload.buf, payload.len, key.buf);
        Py_END_ALLOW_THREADS
    }
    else {
        xor_key((unsigned char *)PyBytes_AS_STRING(out), payload.buf, payload.len, key.buf);
    }
done:
    PyBuffer_Release(&key);
    PyBuffer_Release(&payload);
    return out;
}

static void
write_masked(unsigned char *dst, const unsigned char *src, const unsigned char *key,
             Py_ssize_t count, Py_ssize_t n)
{
    Py_ssize_t head = masked_head(n), i;

    for (i = 0; i < count; i++, dst += head + n, src += n + 3, key += 4) {
        dst[0] = 0x82; /* FIN, binary */
        if (head == 6) {
            dst[1] = (unsigned char)(0x80 | n);
        }
        else {
            dst[1] = 0x80 | 126;
            dst[2] = (unsigned char)(n >> 8);
            dst[3] = (unsigned char)(n & 0xFF);
        }
        memcpy(dst + head - 4, key, 4);
        xor_key(dst + head, src + 3, n, key);
    }
}

static void
write_unmasked(unsigned char *dst, const unsigned char *src, Py_ssize_t count, Py_ssize_t n)
{
    Py_ssize_t head = masked_head(n), i;

    for (i = 0; i < count; i++, dst += n + 3, src += head + n) {
        dst[0] = (unsigned char)(n >> 16);
        dst[1] = (unsigned char)((n >> 8) & 0xFF);
        dst[2] = (unsigned char)(n & 0xFF);
        xor_key(dst + 3, src + head, n, src + head - 4);
    }
}

static void
write_run(int to_frames, unsigned char *dst, const unsigned char *src, const unsigned char *keys,
          Py_ssize_t count, Py_ssize_t n)
{
    if (to_frames) {
        write_masked(dst, src, keys, count, n);
    }
    else {
        write_unmasked(dst, src, count, n);
    }
}

/* mask_run (to_frames) and unmask_run: "data, off, count, n, extra", where
 * extra is the keys (to frames) or the head written first (to a run). */
static PyObject *
convert_run(PyObject *args, int to_frames)
{
    Py_buffer data, extra;
    Py_ssize_t off, count, n, in_stride, size;
    PyObject *out = NULL;
    unsigned char *dst;

    if (!PyArg_ParseTuple(args, to_frames ? "y*nnny*:mask_run" : "y*nnny*:unmask_run",
                          &data, &off, &count, &n, &extra)) {
        return NULL;
    }
    in_stride = to_frames ? n + 3 : masked_head(n) + n;
    if (off < 0 || count < 0 || n < 0 || n > 0xFFFF || off > data.len
        || count > (data.len - off) / in_stride || (to_frames && count > extra.len / 4)) {
        PyErr_SetString(PyExc_ValueError, to_frames
                        ? "mask_run: messages or keys out of bounds"
                        : "unmask_run: frames out of bounds");
        goto done;
    }
    /* (no overflow: at most 8/3 of data.len, or data.len + extra.len) */
    size = to_frames ? count * (masked_head(n) + n) : extra.len + count * (n + 3);
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) {
        goto done;
    }
    dst = (unsigned char *)PyBytes_AS_STRING(out);
    if (!to_frames) {
        memcpy(dst, extra.buf, extra.len);
        dst += extra.len;
    }
    if (size >= RELEASE_GIL_FROM) {
        Py_BEGIN_ALLOW_THREADS
        write_run(to_frames, dst, (const unsigned char *)data.buf + off, extra.buf, count, n);
        Py_END_ALLOW_THREADS
    }
    else {
        write_run(to_frames, dst, (const unsigned char *)data.buf + off, extra.buf, count, n);
    }
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&extra);
    return out;
}

static PyObject *
speedups_mask_run(PyObject *Py_UNUSED(module), PyObject *args)
{
    return convert_run(args, 1);
}

static PyObject *
speedups_unmask_run(PyObject *Py_UNUSED(module), PyObject *args)
{
    return convert_run(args, 0);
}

PyDoc_STRVAR(mask_run_doc,
"mask_run(data, off, count, n, keys, /)\n--\n\n"
"The masked FIN binary frames of the count run messages of n payload bytes\n"
"(each a 3-byte length, then the payload) at data[off:], frame i masked with\n"
"keys[4*i:4*i+4]. The run's lengths are not read: the caller checked them.\n"
"ValueError when the messages or keys are not all there, or n > 65535.");

PyDoc_STRVAR(unmask_run_doc,
"unmask_run(data, off, count, n, head, /)\n--\n\n"
"head, then the count masked frames of n payload bytes at data[off:] as run\n"
"messages (each a 3-byte length, then the unmasked payload). The frames'\n"
"headers are not read: the caller checked them. ValueError when the frames\n"
"are not all there, or n > 65535.");

static PyMethodDef speedups_methods[] = {
    {"mask", speedups_mask, METH_VARARGS, mask_doc},
    {"mask_run", speedups_mask_run, METH_VARARGS, mask_run_doc},
    {"unmask_run", speedups_unmask_run, METH_VARARGS, unmask_run_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot speedups_slots[] = {
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_speedups",
    .m_doc = "RFC 6455 masking in C (the optional accelerator of frames.py and runs.py).",
    .m_size = 0,
    .m_methods = speedups_methods,
    .m_slots = speedups_slots,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
