# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The page walk, compiled; with the engine's other per-page loops (the input guards' tag
scans, the host table's entries, the clusters' signatures, and the others page/compiled.py lists),
each beside a note of its Python reference.

Same walk, step for step, as page/python.py's `walk_python` (which is the reference and
the fallback): the same blocks, segment keys (keys.segment_key's bytes: path, NUL, text),
cues, limits and errors. It reads
lexbor's tree through lexbor's own exported functions, the ones selectolax's extension
module is linked with (`lxb_dom_node_first_child_noi`, `lxb_dom_element_qualified_name`,
...), looked up with dlsym in that already loaded module: no lexbor headers and no
struct layouts are compiled in. The one field read directly is a text node's character
data (a `lexbor_str_t` right after the node header), whose offset is found and
checked at start-up on a probe page (`init`); page/compiled.py then compares this walk
with the Python one on a probe page and uses it only if they agree.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_Append, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_AsUnsignedLongLong, PyLong_AsUnsignedLongLongMask, PyLong_FromLong, PyLong_FromSsize_t, PyLong_FromUnsignedLongLong
from cpython.ref cimport Py_INCREF, PyObject
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH
from cpython cimport array
import array
from bisect import bisect_left
from libc.math cimport exp
from libc.stdint cimport int32_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset, strlen
from cpython.pyport cimport PY_SSIZE_T_MAX


# page/compiled.py uses this module only if it was built from the source it expects. The
# number is page/abi.py's ABI, which setup.py compiles in: bump it there on every change
# of this file's Python interface.
cdef extern from *:
    """
    #ifndef DETEMPLATE_WALK_ABI
    #error "build with setup.py: it defines DETEMPLATE_WALK_ABI from worker/engine/page/abi.py"
    #endif
    """
    int DETEMPLATE_WALK_ABI

ABI = DETEMPLATE_WALK_ABI


cdef extern from "dlfcn.h" nogil:
    void *dlopen(const char *filename, int flags)
    void *dlsym(void *handle, const char *symbol)
    int RTLD_NOW
    int RTLD_NOLOAD


cdef extern from "Python.h":
    object PyType_GenericAlloc(type t, Py_ssize_t nitems)
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    int PyUnicode_KIND(object s)
    void *PyUnicode_DATA(object s)
    Py_UCS4 PyUnicode_READ(int kind, void *data, Py_ssize_t index)
    bint PyUnicode_IS_ASCII(object s)
    bint Py_UNICODE_ISSPACE(Py_UCS4 c)
    bint Py_UNICODE_ISALNUM(Py_UCS4 c)
    object PyUnicode_Substring(object s, Py_ssize_t start, Py_ssize_t end)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void PyObject_GC_UnTrack(object o)
    ctypedef unsigned char Py_UCS1
    ctypedef unsigned short Py_UCS2
    enum:
        PyUnicode_1BYTE_KIND
        PyUnicode_2BYTE_KIND


ctypedef void *(*node_fn)(void *) noexcept nogil
ctypedef uintptr_t (*tag_id_fn)(void *) noexcept nogil
ctypedef int (*type_fn)(void *) noexcept nogil
ctypedef const unsigned char *(*name_fn)(void *, size_t *) noexcept nogil
ctypedef unsigned long long (*hash_fn)(const void *, size_t) noexcept nogil

ctypedef struct lexbor_str:
    unsigned char *data
    size_t length

cdef node_fn _first_child = NULL
cdef node_fn _next = NULL
cdef node_fn _parent = NULL
cdef tag_id_fn _tag_id = NULL
cdef type_fn _type = NULL
cdef name_fn _element_name = NULL
cdef node_fn _first_attr = NULL
cdef node_fn _next_attr = NULL
cdef name_fn _attr_name = NULL
cdef name_fn _attr_value = NULL
cdef Py_ssize_t _text_offset = -1
# The sizes lexbor's node header (lxb_dom_node_t) has had: it grew by one field across
# versions. A text node's string and a document's compatibility mode follow it.
cdef tuple NODE_HEADER_SIZES = (96, 104, 112, 88)
cdef hash_fn _xxh3 = NULL  # XXH3_64bits from the loaded xxhash module (init_hash), else NULL

cdef enum:
    TEXT_ID = 2  # lexbor's tag id of text nodes
    ELEMENT = 1  # LXB_DOM_NODE_TYPE_ELEMENT
    INLINE = 0
    BLOCK = 1
    SKIP = 2
    F_THINT = 1  # page/cues.py F_THINT, F_IN_THINT, F_IN_LIST, F_IN_A
    F_IN_THINT = 4
    F_IN_LIST = 512
    F_IN_A = 4096
    N_CACHED = 4096  # tag ids below this are lexbor's static ones: cached per id
    # Character classes of page/cues.py (C_SPACE ... C_BOUNDARY) and the text
    # statistics columns the walk returns (page/tree.py TEXT_COLUMNS, in this order).
    C_SPACE = 1
    C_PUNCT = 2
    C_SENT = 4
    C_DIGIT = 8
    C_UPPER = 16
    C_PIPE = 32
    C_COMMA = 64
    C_BOUNDARY = 128
    N_STATS = 10
    N_COLUMNS = 10
    LUT_SIZE = 0x2100


cdef object _symbols(str library, tuple names):
    """The addresses of `names` in `library` (a module already loaded) by name, or the reason
    (a str) why not: the library is not loaded, or a name is not in it."""
    cdef void *handle = dlopen(library.encode(), RTLD_NOW | RTLD_NOLOAD)
    if handle == NULL:
        return f"{library} is not loaded"
    found = {}
    for name in names:
        address = <uintptr_t>dlsym(handle, name)
        if address == 0:
            return f"{name.decode()} not found in {library}"
        found[name] = address
    return found


def init(str library, Py_ssize_t probe_text_node, bytes probe_text):
    """Find lexbor's functions in `library` and the text offset on a probe text node.

    Returns None when everything was found, else the reason this walk cannot be used.
    """
    global _first_child, _next, _parent, _tag_id, _type, _element_name, _first_attr, _next_attr
    global _attr_name, _attr_value, _text_offset
    symbols = _symbols(library, (
        b"lxb_dom_node_first_child_noi", b"lxb_dom_node_next_noi", b"lxb_dom_node_parent_noi",
        b"lxb_dom_node_tag_id_noi",
        b"lxb_dom_node_type_noi", b"lxb_dom_element_qualified_name", b"lxb_dom_element_first_attribute_noi",
        b"lxb_dom_element_next_attribute_noi", b"lxb_dom_attr_qualified_name", b"lxb_dom_attr_value_noi",
    ))
    if isinstance(symbols, str):
        return symbols
    _first_child = <node_fn><uintptr_t>symbols[b"lxb_dom_node_first_child_noi"]
    _next = <node_fn><uintptr_t>symbols[b"lxb_dom_node_next_noi"]
    _parent = <node_fn><uintptr_t>symbols[b"lxb_dom_node_parent_noi"]
    _tag_id = <tag_id_fn><uintptr_t>symbols[b"lxb_dom_node_tag_id_noi"]
    _type = <type_fn><uintptr_t>symbols[b"lxb_dom_node_type_noi"]
    _element_name = <name_fn><uintptr_t>symbols[b"lxb_dom_element_qualified_name"]
    _first_attr = <node_fn><uintptr_t>symbols[b"lxb_dom_element_first_attribute_noi"]
    _next_attr = <node_fn><uintptr_t>symbols[b"lxb_dom_element_next_attribute_noi"]
    _attr_name = <name_fn><uintptr_t>symbols[b"lxb_dom_attr_qualified_name"]
    _attr_value = <name_fn><uintptr_t>symbols[b"lxb_dom_attr_value_noi"]
    # A text node is a node header followed by its lexbor_str_t: try the header's sizes
    # (NODE_HEADER_SIZES), checking length then bytes.
    cdef char *node = <char *><uintptr_t>probe_text_node
    cdef lexbor_str *s
    cdef Py_ssize_t offset
    _text_offset = -1
    if _tag_id(node) != TEXT_ID:
        return "the probe node is not a text node"
    for offset in NODE_HEADER_SIZES:
        s = <lexbor_str *>(node + offset)
        if s.length == <size_t>len(probe_text) and s.data != NULL:
            if memcmp(s.data, <const char *>probe_text, s.length) == 0:
                _text_offset = offset
                return None
    return "the text of a text node was not found where lexbor keeps it"


def init_hash(str library, hash64, list probes):
    """Find XXH3_64bits in `library` (the loaded xxhash extension module, which exports it) so
    keys are hashed in C, without a bytes object and a call each; used only when it gives
    `hash64`'s value (keys.segment_key's function) on every probe. Returns None when it is
    used, else the reason the keys go through `hash64`."""
    global _xxh3
    _xxh3 = NULL
    symbols = _symbols(library, (b"XXH3_64bits",))
    if isinstance(symbols, str):
        return symbols
    cdef hash_fn found = <hash_fn><uintptr_t>symbols[b"XXH3_64bits"]
    cdef bytes data
    for data in probes:
        if found(<const char *>data, len(data)) != hash64(data):
            return "XXH3_64bits gives other values than the xxhash module"
    _xxh3 = found
    return None


# -- the parse ------------------------------------------------------------------------------
# selectolax's `LexborHTMLParser(html)` makes a lexbor document for each page (its hash tables,
# memory pools and HTML parser), parses the page's UTF-8 (a copy of the str, encoded) and
# destroys it all with the object. `parse_document` parses with the same lexbor functions and
# the same document settings (a whole document, DOM events on, scripting off), from the str's
# own bytes where it is ASCII, into a document taken from a small pool: a document freed is
# cleaned (lexbor keeps its parser and some of its memory) and parsed into again, unless its
# page was large. Used only where page/guards.py's probe gave selectolax's tree, walked, on
# its probe pages.

ctypedef void *(*doc_create_fn)() noexcept nogil
ctypedef unsigned int (*doc_parse_fn)(void *, const unsigned char *, size_t) noexcept nogil
ctypedef void (*doc_clean_fn)(void *) noexcept nogil
ctypedef void (*doc_opt_fn)(void *, unsigned int) noexcept nogil
ctypedef void (*doc_flag_fn)(void *, bint) noexcept nogil

cdef doc_create_fn _doc_create = NULL
cdef doc_parse_fn _doc_parse = NULL
cdef doc_clean_fn _doc_clean = NULL
cdef node_fn _doc_destroy = NULL
cdef doc_opt_fn _doc_dom_opt = NULL
cdef doc_flag_fn _doc_scripting = NULL
cdef node_fn _doc_root = NULL
cdef node_fn _doc_head = NULL
cdef node_fn _doc_body = NULL

cdef enum:
    DOC_POOL = 4  # cleaned documents kept for the next pages (a held first page keeps its own)
    # A document that parsed more UTF-8 than this is destroyed, not pooled: a cleaned document
    # keeps memory in proportion to its last page until it parses again (after a 5.6 MB page,
    # 20-26 MB of the process' RSS, which destroying it gives back).
    DOC_POOL_MAX_BYTES = 1 << 20

cdef void *_doc_pool[DOC_POOL]
cdef int _doc_pooled = 0
_parse_error = RuntimeError  # what a failed parse raises: selectolax's error (init_documents)
# A document's compatibility mode (lexbor's `compat_mode`: 0 no quirks, 1 quirks, 2 limited
# quirks), which decides parts of the tree (a <table> closes an open <p> except in quirks
# mode). lexbor sets it from the page's doctype only where that is quirky, and cleaning a
# document leaves it as its last page had it: a pooled document is set back to no quirks
# before each page, as a new one starts. Its offset (right after the node header of the
# document's struct) is found on probe pages by `init_documents`; -1: not found, no pooling.
cdef Py_ssize_t _compat_offset = -1


def init_documents(str library, error):
    """Find the lexbor functions `parse_document` uses in `library` (selectolax's loaded
    module); `error`: the exception class a failed parse raises (selectolax's). Returns None
    when every one was found, else the reason `parse_document` cannot be used."""
    global _doc_create, _doc_parse, _doc_clean, _doc_destroy, _doc_dom_opt, _doc_scripting
    global _doc_root, _doc_head, _doc_body, _parse_error
    found = _symbols(library, (
        b"lxb_html_document_create", b"lxb_html_document_parse", b"lxb_html_document_clean",
        b"lxb_html_document_destroy", b"lxb_html_document_dom_opt_set_noi", b"lxb_dom_document_scripting_set_noi",
        b"lxb_dom_document_root", b"lxb_html_document_head_element_noi", b"lxb_html_document_body_element_noi",
    ))
    if isinstance(found, str):
        return found
    _doc_create = <doc_create_fn><uintptr_t>found[b"lxb_html_document_create"]
    _doc_parse = <doc_parse_fn><uintptr_t>found[b"lxb_html_document_parse"]
    _doc_clean = <doc_clean_fn><uintptr_t>found[b"lxb_html_document_clean"]
    _doc_destroy = <node_fn><uintptr_t>found[b"lxb_html_document_destroy"]
    _doc_dom_opt = <doc_opt_fn><uintptr_t>found[b"lxb_html_document_dom_opt_set_noi"]
    _doc_scripting = <doc_flag_fn><uintptr_t>found[b"lxb_dom_document_scripting_set_noi"]
    _doc_root = <node_fn><uintptr_t>found[b"lxb_dom_document_root"]
    _doc_head = <node_fn><uintptr_t>found[b"lxb_html_document_head_element_noi"]
    _doc_body = <node_fn><uintptr_t>found[b"lxb_html_document_body_element_noi"]
    _parse_error = error
    _find_compat_offset()
    return None


cdef int _compat_at(void *doc, Py_ssize_t offset, bytes page) noexcept:
    """The int at `offset` in `doc` after it parsed `page`."""
    _doc_parse(doc, <const unsigned char *><const char *>page, <size_t>len(page))
    return (<int *>(<char *>doc + offset))[0]


cdef void _find_compat_offset() noexcept:
    """Where a document keeps its compatibility mode: the one offset among NODE_HEADER_SIZES
    where a page without a doctype (quirks), an XHTML 1.0 Transitional page (limited quirks)
    and, in a fresh document, an HTML5 page (no quirks) leave 1, 2 and 0; -1 where none or
    more than one does."""
    global _compat_offset
    cdef void *doc
    cdef Py_ssize_t offset
    found = []
    for offset in NODE_HEADER_SIZES:
        ok = True
        for page, mode in ((b"<!doctype html><p>a", 0), (b"<p>a", 1),
                           (b'<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
                            b'"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd"><p>a', 2)):
            doc = _doc_create()
            if doc == NULL:
                return
            ok = ok and _compat_at(doc, offset, page) == mode
            _doc_destroy(doc)
        if ok:
            found.append(offset)
    _compat_offset = found[0] if len(found) == 1 else -1


def compat_offset():
    """The offset `init_documents` found for a document's compatibility mode (-1: none; the
    documents are then not pooled)."""
    return _compat_offset


cdef class Node:
    """An element of a `Document`, by its address: what the compiled readers take (a
    selectolax node's `mem_id`)."""

    cdef readonly Py_ssize_t mem_id


cdef inline object _node(void *address):
    if address == NULL:
        return None
    cdef Node node = Node.__new__(Node)
    node.mem_id = <Py_ssize_t>address
    return node


cdef class Document:
    """A parsed page (`parse_document`): its root, head and body as `Node`s, as selectolax's
    parser has them (None where there is none, and in a Document not made by `parse_document`).
    Its lexbor document goes back to the pool when the object is freed."""

    cdef void *doc
    cdef size_t size  # the bytes it parsed

    def __dealloc__(self):
        global _doc_pooled
        if self.doc == NULL:
            return
        if _doc_pooled < DOC_POOL and self.size <= DOC_POOL_MAX_BYTES and _compat_offset >= 0:
            _doc_clean(self.doc)
            _doc_pool[_doc_pooled] = self.doc
            _doc_pooled += 1
        else:
            _doc_destroy(self.doc)
        self.doc = NULL

    @property
    def root(self):
        return None if self.doc == NULL else _node(_doc_root(self.doc))

    @property
    def head(self):
        return None if self.doc == NULL else _node(_doc_head(self.doc))

    @property
    def body(self):
        return None if self.doc == NULL else _node(_doc_body(self.doc))


def pooled_documents():
    """How many cleaned documents the pool holds now (at most DOC_POOL)."""
    return _doc_pooled


def parse_document(str html):
    """`html` parsed as selectolax's `LexborHTMLParser(html)` parses it: a `Document`.
    (`init_documents` first.)"""
    global _doc_pooled
    cdef void *doc
    if _doc_parse == NULL:
        raise RuntimeError("detemplate.engine.page._walk.init_documents() has not succeeded")
    if _doc_pooled:
        _doc_pooled -= 1
        doc = _doc_pool[_doc_pooled]
        (<int *>(<char *>doc + _compat_offset))[0] = 0  # no quirks, as a new document (see above)
    else:
        doc = _doc_create()
        if doc == NULL:
            raise MemoryError("lexbor could not make a document")
    cdef Document out = Document.__new__(Document)
    out.doc = doc  # freed (or pooled) with `out` from here on, whatever happens
    _doc_dom_opt(doc, 0)
    _doc_scripting(doc, False)
    cdef bytes encoded
    cdef const unsigned char *data
    cdef size_t n
    cdef unsigned int status
    if PyUnicode_IS_ASCII(html):
        data = <const unsigned char *>PyUnicode_DATA(html)  # ASCII is its own UTF-8
        n = <size_t>PyUnicode_GET_LENGTH(html)
    else:
        encoded = html.encode("UTF-8", "ignore")  # selectolax's encoding of a str
        data = <const unsigned char *><const char *>encoded
        n = <size_t>len(encoded)
    out.size = n
    with nogil:
        status = _doc_parse(doc, data, n)
    if status != 0:
        raise _parse_error("Can't parse HTML.")
    return out


# Python's str.split() whitespace, as UTF-8: ASCII 9-13, 28-32, and these sequences.
cdef inline Py_ssize_t _space_len(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """Length of the whitespace character at s[i], or 0."""
    cdef unsigned char c = s[i]
    cdef unsigned char c1, c2
    if c < 0x80:
        return 1 if (c == 32 or (9 <= c <= 13) or (28 <= c <= 31)) else 0
    if c == 0xC2:
        if i + 1 < n and (s[i + 1] == 0x85 or s[i + 1] == 0xA0):
            return 2
        return 0
    if c == 0xE1:
        if i + 2 < n and s[i + 1] == 0x9A and s[i + 2] == 0x80:
            return 3
        return 0
    if c == 0xE2:
        if i + 2 >= n:
            return 0
        c1 = s[i + 1]
        c2 = s[i + 2]
        if c1 == 0x80 and (c2 <= 0x8A or c2 == 0xA8 or c2 == 0xA9 or c2 == 0xAF):
            return 3 if c2 >= 0x80 else 0
        if c1 == 0x81 and c2 == 0x9F:
            return 3
        return 0
    if c == 0xE3:
        if i + 2 < n and s[i + 1] == 0x80 and s[i + 2] == 0x80:
            return 3
        return 0
    return 0


cdef bint _word_char_at(const unsigned char *s, Py_ssize_t at, Py_ssize_t n) except -1:
    """Whether the character whose UTF-8 starts at s[at] (of n bytes) is a word character,
    `c.isalnum() or c == "_"` (page/python.py `join_pieces`)."""
    cdef unsigned char c = s[at]
    cdef Py_ssize_t end = at + 1
    if c < 0x80:
        return _ascii_alnum(c) or c == 95
    while end < n and (s[end] & 0xC0) == 0x80:
        end += 1
    text = PyUnicode_DecodeUTF8(<const char *>s + at, end - at, "replace")
    return PyUnicode_GET_LENGTH(text) == 1 and Py_UNICODE_ISALNUM(PyUnicode_READ(PyUnicode_KIND(text), PyUnicode_DATA(text), 0))


cdef inline Py_ssize_t _last_char_at(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """Where the last UTF-8 character of s[:n] (n > 0) starts."""
    cdef Py_ssize_t i = n - 1
    while i > 0 and (s[i] & 0xC0) == 0x80:
        i -= 1
    return i


# Per byte: 0 an ordinary byte, 1 ASCII whitespace, 2 the first byte of a multi-byte
# sequence that may be whitespace (U+0085, U+00A0, U+1680, U+2000-U+3000).
cdef unsigned char _BYTE_CLASS[256]
for _b in range(256):
    _BYTE_CLASS[_b] = 1 if (_b == 32 or 9 <= _b <= 13 or 28 <= _b <= 31) else 2 if _b in (0xC2, 0xE1, 0xE2, 0xE3) else 0


cdef Py_ssize_t _normalize(const unsigned char *s, Py_ssize_t n, unsigned char *out,
                           bint *ascii=NULL) noexcept nogil:
    """" ".join(text.split()) on UTF-8 bytes; `out` has room for n bytes. Returns the length;
    `ascii`, when given, is set to whether every byte kept is ASCII."""
    cdef Py_ssize_t i = 0, j = 0, w
    cdef bint gap = False
    cdef unsigned char c, k, seen = 0
    while i < n:
        c = s[i]
        k = _BYTE_CLASS[c]
        if k:
            w = 1 if k == 1 else _space_len(s, i, n)
            if w:
                gap = True
                i += w
                continue
        if gap:
            if j:
                out[j] = 32
                j += 1
            gap = False
        out[j] = c
        seen |= c
        j += 1
        i += 1
    if ascii != NULL:
        ascii[0] = seen < 0x80
    return j


cdef Py_ssize_t _utf8_chars(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """The characters of s[:n] when it is UTF-8 that Python's decoder takes (no surrogates,
    no overlong forms, nothing past U+10FFFF); -1 when it is not."""
    cdef Py_ssize_t i = 0, chars = 0, need, k
    cdef unsigned char c, lo, hi
    while i < n:
        c = s[i]
        chars += 1
        if c < 0x80:
            i += 1
            continue
        # The second byte's range: narrower after E0 (overlong), ED (surrogates), F0
        # (overlong) and F4 (past U+10FFFF).
        lo = 0xA0 if c == 0xE0 else 0x90 if c == 0xF0 else 0x80
        hi = 0x9F if c == 0xED else 0x8F if c == 0xF4 else 0xBF
        if 0xC2 <= c <= 0xDF:
            need = 1
        elif 0xE0 <= c <= 0xEF:
            need = 2
        elif 0xF0 <= c <= 0xF4:
            need = 3
        else:
            return -1
        if i + need >= n:
            return -1  # cut short
        if not lo <= s[i + 1] <= hi:
            return -1
        for k in range(2, need + 1):
            if not 0x80 <= s[i + k] <= 0xBF:
                return -1
        i += need + 1
    return chars


def utf8_chars(bytes data):
    """`_utf8_chars`, for tests: len(data.decode()), or -1 where that raises."""
    return _utf8_chars(<const unsigned char *><const char *>data, len(data))


cdef array.array _DOUBLES = array.array("d")
cdef const unsigned char *_attr_bytes(void *element, const char *wanted, size_t wanted_len,
                                      size_t *length) noexcept nogil:
    """The value of the element's first attribute named `wanted` (its bytes, `length` of them),
    or NULL (`length` 0) when it has none, or one without a value."""
    cdef void *attr = _first_attr(element)
    cdef size_t n = 0
    cdef const unsigned char *name
    cdef const unsigned char *value
    length[0] = 0
    while attr != NULL:
        name = _attr_name(attr, &n)
        if name != NULL and n == wanted_len and memcmp(name, wanted, n) == 0:
            value = _attr_value(attr, &n)
            if value != NULL:
                length[0] = n
            return value
        attr = _next_attr(attr)
    return NULL


cdef object _attr_str(void *element, const char *wanted, size_t wanted_len):
    """`_attr_bytes` as a str (U+FFFD for bad bytes), as selectolax's `attributes` gives it:
    None when the attribute is absent or has no value."""
    cdef size_t length = 0
    cdef const unsigned char *value = _attr_bytes(element, wanted, wanted_len, &length)
    if value == NULL:
        return None
    return _utf8(<const char *>value, length, "replace")


cdef void _class_and_id(void *element, const unsigned char **cls, size_t *cls_len, const unsigned char **ident,
                        size_t *id_len) noexcept nogil:
    """`_attr_bytes` of "class" and of "id" in one pass over the element's attributes."""
    cdef void *attr = _first_attr(element)
    cdef size_t n = 0
    cdef const unsigned char *name
    cdef bint want_cls = True, want_id = True
    cls[0] = ident[0] = NULL
    cls_len[0] = id_len[0] = 0
    while attr != NULL and (want_cls or want_id):
        name = _attr_name(attr, &n)
        if name != NULL:
            if want_cls and n == 5 and memcmp(name, b"class", 5) == 0:
                want_cls = False
                cls[0] = _attr_value(attr, &n)
                if cls[0] != NULL:
                    cls_len[0] = n
            elif want_id and n == 2 and memcmp(name, b"id", 2) == 0:
                want_id = False
                ident[0] = _attr_value(attr, &n)
                if ident[0] != NULL:
                    id_len[0] = n
        attr = _next_attr(attr)


cdef tuple _NO_CLASS_ID = (0, b"")  # a layout element without class or id: no hints, no layout form
cdef enum:
    # A walker's class and id cache: as many entries as cues.HINTS_MAX, and only pairs of at
    # most cues.HINTS_MAX_CHARS bytes, so its entries (a key, a tuple, a layout form no longer
    # than the pair) take about 50 MB at most.
    CLASS_IDS_MAX = 1 << 17
    CLASS_ID_MAX_BYTES = 256
    CLASS_ID_SLOTS_BITS = 18  # the cache's open-addressing table: twice CLASS_IDS_MAX slots
    CLASS_ID_SLOTS = 1 << CLASS_ID_SLOTS_BITS


cdef inline bint _matches_lower_ucs(int kind, void *data, Py_ssize_t n, Py_ssize_t at, const char *needle,
                                   Py_ssize_t m) noexcept:
    """Whether the text (a str's data of any kind), A-Z lower-cased and every other character as
    it is, holds the lower-case ASCII needle at `at`."""
    cdef Py_ssize_t j
    cdef unsigned int c
    if at < 0 or at + m > n:
        return False
    for j in range(m):
        c = <unsigned int>PyUnicode_READ(kind, data, at + j)
        if 65 <= c <= 90:
            c += 32
        if c != <unsigned int><unsigned char>needle[j]:
            return False
    return True


cdef inline bint _copyright_mark(int kind, void *data, Py_ssize_t n) noexcept:
    """Whether the text (a str's data of any kind) holds "©", or "copyright" or "all rights
    reserved" in any case (A-Z folded: the only characters past ASCII that lower-case to
    ASCII letters, U+0130 and U+212A, cannot complete either).

    Both words contain "right": one pass looks for its "g" (rare in text) and checks around it.
    """
    cdef Py_ssize_t i
    cdef unsigned int c
    for i in range(n):
        c = <unsigned int>PyUnicode_READ(kind, data, i)
        if c == 0xa9:  # ©
            return True
        if 2 <= i < n - 2 and (c == 103 or c == 71) and _matches_lower_ucs(kind, data, n, i - 2, b"right", 5):
            if _matches_lower_ucs(kind, data, n, i - 6, b"copyright", 9) \
                    or _matches_lower_ucs(kind, data, n, i - 6, b"all rights reserved", 19):
                return True
    return False


def normalize(bytes data):
    """The whitespace normalisation of the walk, for tests: UTF-8 in, str out."""
    cdef Py_ssize_t n = len(data)
    cdef bytearray out = bytearray(n)
    cdef Py_ssize_t m = _normalize(<const unsigned char *>data, n, <unsigned char *><char *>out)
    return PyUnicode_DecodeUTF8(<char *>out, m, NULL)


cdef int _grow(unsigned char **buf, Py_ssize_t *cap, Py_ssize_t n) except -1:
    """Make a malloc'ed buffer hold at least n bytes (doubling what is asked, to grow rarely)."""
    cdef unsigned char *p
    if n > cap[0]:
        p = <unsigned char *>realloc(buf[0], n * 2)
        if p == NULL:
            raise MemoryError()
        buf[0] = p
        cap[0] = n * 2
    return 0


cdef inline int _put_item(list lst, Py_ssize_t i, long value) except -1:
    """Fill item i of a new list (PyList_New's, every item unset) with an int."""
    item = PyLong_FromLong(value)
    Py_INCREF(item)  # SET_ITEM takes the reference it is given
    PyList_SET_ITEM(lst, i, item)
    return 0


cdef inline void _put(object tup, Py_ssize_t i, object item):
    """Fill item i of a new tuple (SET_ITEM takes the reference it is given)."""
    Py_INCREF(item)
    PyTuple_SET_ITEM(tup, i, item)


cdef inline bint _same(str a, str b) noexcept:
    """a == b for two strs, decided as CPython's own equality does (equal strs have one kind,
    PEP 393's canonical form: the same length, kind and code units). Cython's `==` on strs
    calls PyUnicode_Compare, which orders them: 95 instructions a comparison."""
    cdef Py_ssize_t n
    if a is b:
        return True
    n = PyUnicode_GET_LENGTH(a)
    if n != PyUnicode_GET_LENGTH(b) or PyUnicode_KIND(a) != PyUnicode_KIND(b):
        return False
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), n * PyUnicode_KIND(a)) == 0


def same(str a, str b):
    """`_same`, for tests (it must be `==` on every pair of strs)."""
    return _same(a, b)


cdef object _utf8(const char *s, Py_ssize_t n, const char *errors):
    """PyUnicode_DecodeUTF8(s, n, errors), an ASCII text made directly: most of a page's
    texts, paths and hrefs are ASCII, which the decoder copies through its general path
    (about 430 instructions for a segment's text)."""
    cdef Py_ssize_t i = 0
    cdef uint64_t word, seen = 0
    while i + 8 <= n:  # eight bytes at a time
        memcpy(&word, s + i, 8)
        seen |= word
        i += 8
    while i < n:
        seen |= <unsigned char>s[i]
        i += 1
    if seen & 0x8080808080808080ULL or n < 2:  # (a text of one character: the decoder's cached one)
        return PyUnicode_DecodeUTF8(s, n, errors)
    out = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(out), s, n)
    return out


def utf8_str(bytes data):
    """`_utf8`, for tests: data.decode("utf-8", "replace")."""
    return _utf8(<const char *>data, len(data), "replace")


ctypedef fused sorted_t:
    Py_ssize_t
    unsigned long long


cdef inline Py_ssize_t _bisect_left(const sorted_t *a, Py_ssize_t lo, Py_ssize_t hi, sorted_t x) noexcept nogil:
    """Python's bisect_left over the ascending a[lo:hi]."""
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline Py_ssize_t _index_in_sorted(const unsigned long long *a, Py_ssize_t n, unsigned long long x) noexcept nogil:
    """The index of x in the ascending a[:n], or -1."""
    cdef Py_ssize_t lo = _bisect_left(a, 0, n, x)
    return lo if lo < n and a[lo] == x else -1


cdef enum:
    STOP_SLOTS_BITS = 8
    STOP_SLOTS = 1 << STOP_SLOTS_BITS


cdef inline unsigned int _slot(unsigned long long x, int bits) noexcept nogil:
    """x's first slot in an open-addressing table of 2**bits slots (Fibonacci hashing: the top bits)."""
    return <unsigned int>((x * <unsigned long long>0x9E3779B97F4A7C15) >> (64 - bits))


cdef inline void _table_add(unsigned long long *table, unsigned long long x) noexcept nogil:
    cdef unsigned int h = _slot(x, STOP_SLOTS_BITS)
    while table[h] != 0 and table[h] != x:
        h = (h + 1) & (STOP_SLOTS - 1)
    table[h] = x


cdef inline bint _in_table(const unsigned long long *table, unsigned long long x) noexcept nogil:
    """Whether x is in the open-addressing table (x != 0; the table has an empty slot)."""
    cdef unsigned int h = _slot(x, STOP_SLOTS_BITS)
    while table[h] != 0:
        if table[h] == x:
            return True
        h = (h + 1) & (STOP_SLOTS - 1)
    return False


cdef inline bint _in_sorted(const unsigned long long *a, Py_ssize_t n, unsigned long long x) noexcept nogil:
    """Whether x is among the ascending a[:n] (the packed words of a set: stopwords, tags)."""
    return _index_in_sorted(a, n, x) >= 0


def _pack(bytes word):
    """An ASCII word of up to 8 bytes as one integer (little-endian)."""
    return int.from_bytes(word, "little")


cdef class _Tag:
    cdef object name      # str
    cdef object utf8      # bytes: the name as it goes into paths
    cdef int kind
    cdef int bits
    cdef bint line        # an inline element that ends a line of text (cues.LINE_TAGS)
    cdef bint glue        # <wbr>: the words on either side are one (cues.GLUE_TAG), as across a comment
    cdef bint body        # <body>: its classes name the page's type, not its layout
    cdef Py_ssize_t group  # its column among the tag features (Walker.tag_groups)


cdef inline unsigned long long _mix(unsigned long long z) noexcept nogil:
    """splitmix64's finaliser (detectors/clusters.py `mix64`, detectors/layout.py `tagged_key`)."""
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef struct _KeyRef:
    unsigned long long key
    PyObject *obj


cdef struct _Scored:
    double score
    Py_ssize_t chars


ctypedef fused sortable:
    unsigned long long
    _KeyRef
    _Scored


cdef inline bint _before(sortable *a, sortable *b) noexcept nogil:
    if sortable is _KeyRef:
        return a.key < b.key
    elif sortable is _Scored:
        return a.score < b.score
    else:
        return a[0] < b[0]


# Ciura's gaps for Shell's sort, then each about 2.25 times the last.
cdef Py_ssize_t _GAPS[24]
_GAPS[:9] = [1, 4, 10, 23, 57, 132, 301, 701, 1750]
for _g in range(9, 24):
    _GAPS[_g] = <Py_ssize_t>(_GAPS[_g - 1] * 2.25)


cdef void _sort(sortable *a, Py_ssize_t n) noexcept nogil:
    """a[:n] in ascending order (by `_before`; not stable): Shell's sort, in place. Here
    rather than libc's qsort, whose comparison through a function pointer cost more than the
    sorting (a page's segment keys, layout keys and block scores: ~100 each)."""
    cdef Py_ssize_t g = 0, gap, i, j
    cdef sortable x
    while g + 1 < 24 and _GAPS[g + 1] < n:
        g += 1
    while g >= 0:
        gap = _GAPS[g]
        for i in range(gap, n):
            x = a[i]
            j = i
            while j >= gap and _before(&x, &a[j - gap]):
                a[j] = a[j - gap]
                j -= gap
            a[j] = x
        g -= 1


cdef inline unsigned long long _key64(object key) except? 0xFFFFFFFFFFFFFFFFULL:
    """A key, an int of 0 to 2**64 - 1 (an XXH3-64, or one salted and masked to 64 bits), as
    a C integer: PyLong_AsUnsignedLongLong's value, read digit by digit rather than through
    the byte-array conversion that function takes for ints of three digits (200 instructions
    a key, for each of a page's segment and layout keys)."""
    return PyLong_AsUnsignedLongLongMask(key)


cdef tuple _distinct_keys(list segments):
    """The distinct keys of these lists of segments, sorted and as a set (pipeline.py
    `segment_keys_python`): the keys' own int objects sorted by value in C, where `sorted`
    compares Python ints of three digits. Every key is an XXH3-64, an int of 0 to 2**64 - 1
    (by `_hash`, or keys.segment_key in the Python walk)."""
    cdef Py_ssize_t total = 0, k = 0, i
    for segs in segments:
        total += len(<list>segs)
    cdef _KeyRef *refs = <_KeyRef *>malloc((total + 1) * sizeof(_KeyRef))
    if refs == NULL:
        raise MemoryError()
    cdef list out = []
    cdef set distinct = set()
    try:
        for segs in segments:
            for seg in <list>segs:
                key = (<tuple>seg)[0]
                refs[k].key = _key64(key)
                refs[k].obj = <PyObject *>key
                k += 1
        _sort(refs, total)
        for i in range(total):
            if i and refs[i].key == refs[i - 1].key:
                continue
            key = <object>refs[i].obj
            out.append(key)
            distinct.add(key)
    finally:
        free(refs)
    return out, distinct


ctypedef struct _Node:
    # One node of the walk (a layout element with its own text run): page/tree.py PageTree's
    # columns, and its DOM path, pbuf[path_at:path_at + path_len].
    Py_ssize_t parent
    Py_ssize_t depth
    Py_ssize_t start
    Py_ssize_t chars
    Py_ssize_t achars
    Py_ssize_t links
    Py_ssize_t ends
    long flags
    Py_ssize_t group  # its column among the tag features (Walker.tag_groups)
    Py_ssize_t path_at
    Py_ssize_t path_len


cdef enum:
    MAX_CLOSERS = 16


cdef class Walker:
    """The walk for one set of block and skip tags (its tag cache is per set)."""

    cdef frozenset block_tags
    cdef frozenset skip_tags
    cdef dict inherit
    cdef object segment_type
    cdef object block_type
    cdef object hash64
    cdef object bad_input
    cdef object hints  # page/compiled.py `hints`: the compiled marks, or cues.hints
    cdef list cached  # tag id -> _Tag or None
    cdef bytes lut  # character class of each code point below LUT_SIZE (cues.LUT)
    cdef Py_UCS4 closer_codes[MAX_CLOSERS]  # the characters that end a sentence (cues.CLOSERS)
    cdef int n_closers
    cdef frozenset stopwords
    # The ASCII stopwords, packed little-endian, in an open-addressing table (0: an empty slot;
    # no packed word is 0) of STOP_SLOTS slots, at most half of them full (`_is_stopword`).
    cdef unsigned long long stop_table[STOP_SLOTS]
    cdef Py_ssize_t max_stop_len  # the longest stopword's characters
    cdef tuple copyright_marks
    cdef dict tag_groups  # tag name -> its column among the tag features (cues.TAG_INDEX)
    cdef Py_ssize_t other_group
    cdef frozenset line_tags  # cues.LINE_TAGS
    cdef object has_word  # cues.has_word
    cdef object layout_classes  # page/compiled.py `layout_classes`: the compiled marks, or cues.layout_classes
    # A layout element's class and id by their bytes' XXH3 (class, NUL, id, whether a body's)
    # -> (hint bits, the layout form of its classes in UTF-8): what `hints` and
    # `layout_classes` give for the decoded pair, without decoding it again on every page.
    # The hashes in an open-addressing table of C integers (no int made to look one up);
    # bounded (CLASS_IDS_MAX entries, the table at most half full).
    cdef list class_ids  # the entries, in the order they came
    cdef unsigned long long *class_keys  # by slot: an entry's hash...
    cdef unsigned int *class_slots  # ...and its place in class_ids plus one (0: an empty slot)
    cdef unsigned char *cbuf  # class, NUL, id: the bytes hashed
    cdef Py_ssize_t ccap

    # One walk's state.
    cdef bint cues
    cdef Py_ssize_t max_depth, budget, max_nodes, total
    cdef list tags, segments, anchors
    cdef _Node *nodes  # the nodes so far, in document order (the Python lists made at the end)
    cdef Py_ssize_t n_nodes, nodes_cap
    cdef unsigned char *pbuf  # the nodes' DOM paths, one after the other
    cdef Py_ssize_t pbuf_len, pbuf_cap
    cdef list layout, container
    cdef unsigned char *buf  # the DOM path of the node being visited
    cdef Py_ssize_t cap
    cdef unsigned char *text_buf  # one text node's normalised text
    cdef Py_ssize_t text_cap
    cdef unsigned char *key_buf  # path, NUL, text: the bytes a segment key hashes
    cdef Py_ssize_t key_cap
    cdef unsigned char *lbuf  # \x01 and the layout path of the node being visited (keys.layout_key's bytes)
    cdef Py_ssize_t lcap
    # The open run of text (page/python.py): its block, that block's path length in buf,
    # its line element, and its pieces: each text node's normalised text in run_buf, with
    # whether white space led or trailed it there, and the <a> it is in (-1: none).
    cdef Py_ssize_t run_blk, run_path_len
    cdef object run_line
    cdef unsigned char *run_buf
    cdef Py_ssize_t run_cap, run_len
    cdef Py_ssize_t *piece_at
    cdef Py_ssize_t *piece_len
    cdef long *piece_anchor
    cdef unsigned char *piece_edges  # 1: white space before it, 2: after it
    cdef Py_ssize_t pieces, pieces_cap
    cdef long anchor_ids
    # The segments' order across blocks, when asked for (walk's `runs`): (node, count) pairs
    # of consecutive segments of one node on one line, the last pair still open in seq_node,
    # seq_count; seq_fresh: the next segment is the first of a run; seq_in_line: the last
    # one was in a line element; seq_break: a <br> or <hr> came after it.
    cdef list seq, seq_out  # seq_out: the caller's `runs`, given seq numbered as blocks at the end
    cdef Py_ssize_t seq_node, seq_count
    cdef bint seq_fresh, seq_in_line, seq_break

    def __cinit__(self):
        self.buf = NULL
        self.cap = 0
        self.text_buf = NULL
        self.text_cap = 0
        self.key_buf = NULL
        self.key_cap = 0
        self.lbuf = NULL
        self.lcap = 0
        self.cbuf = NULL
        self.ccap = 0
        self.run_buf = NULL
        self.run_cap = 0
        self.piece_at = NULL
        self.piece_len = NULL
        self.piece_anchor = NULL
        self.piece_edges = NULL
        self.pieces_cap = 0
        self.class_keys = NULL
        self.class_slots = NULL
        self.nodes = NULL
        self.n_nodes = 0
        self.nodes_cap = 0
        self.pbuf = NULL
        self.pbuf_len = 0
        self.pbuf_cap = 0

    def __dealloc__(self):
        free(self.class_keys)
        free(self.class_slots)
        free(self.nodes)
        free(self.pbuf)
        free(self.buf)
        free(self.text_buf)
        free(self.key_buf)
        free(self.lbuf)
        free(self.run_buf)
        free(self.piece_at)
        free(self.piece_len)
        free(self.piece_anchor)
        free(self.piece_edges)
        free(self.cbuf)

    def __init__(self, frozenset block_tags, frozenset skip_tags, dict inherit, segment_type, block_type,
                 hash64, bad_input, hints, bytes lut, frozenset closers,
                 frozenset stopwords, tuple copyright_marks, dict tag_groups, Py_ssize_t other_group,
                 frozenset line_tags, has_word, layout_classes):
        self.block_tags = block_tags
        self.skip_tags = skip_tags
        self.inherit = inherit
        self.segment_type = segment_type
        self.block_type = block_type
        self.hash64 = hash64
        self.bad_input = bad_input
        self.hints = hints
        self.cached = [None] * N_CACHED
        if len(lut) != LUT_SIZE + 1:
            raise ValueError("the character class table has the wrong size")
        self.lut = lut
        if len(closers) > MAX_CLOSERS or any(len(c) != 1 for c in closers):
            raise ValueError(f"the sentence closers must be at most {MAX_CLOSERS} single characters")
        self.n_closers = 0
        for c in sorted(closers):
            self.closer_codes[self.n_closers] = ord(c)
            self.n_closers += 1
        self.stopwords = stopwords
        self.copyright_marks = copyright_marks
        self.tag_groups = tag_groups
        self.other_group = other_group
        self.line_tags = line_tags
        self.has_word = has_word
        self.layout_classes = layout_classes
        self.class_ids = []
        if any(w.isascii() and len(w) > 8 for w in stopwords):
            raise ValueError("an ASCII stopword of more than 8 characters does not pack into the table")
        packed = sorted(_pack(w.encode()) for w in stopwords if w.isascii() and w)
        if 2 * len(packed) > STOP_SLOTS:
            raise ValueError("too many stopwords")
        memset(self.stop_table, 0, sizeof(self.stop_table))
        for value in packed:
            _table_add(self.stop_table, value)
        self.max_stop_len = max(map(len, stopwords), default=0)

    cdef int _reserve(self, Py_ssize_t n) except -1:
        return _grow(&self.buf, &self.cap, n)

    cdef Py_ssize_t _add_node(self, Py_ssize_t parent, Py_ssize_t depth, long flags, Py_ssize_t group,
                              Py_ssize_t path_len) except -1:
        """A new node (its path buf[:path_len], its text from here on); returns its number."""
        cdef Py_ssize_t k = self.n_nodes
        cdef _Node *grown
        cdef _Node *node
        if k == self.nodes_cap:
            grown = <_Node *>realloc(self.nodes, (2 * k + 64) * sizeof(_Node))
            if grown == NULL:
                raise MemoryError()
            self.nodes = grown
            self.nodes_cap = 2 * k + 64
        _grow(&self.pbuf, &self.pbuf_cap, self.pbuf_len + path_len)
        memcpy(self.pbuf + self.pbuf_len, self.buf, path_len)
        node = &self.nodes[k]
        node.parent = parent
        node.depth = depth
        node.start = self.total
        node.chars = 0
        node.achars = 0
        node.links = 0
        node.ends = k + 1
        node.flags = flags
        node.group = group
        node.path_at = self.pbuf_len
        node.path_len = path_len
        self.pbuf_len += path_len
        self.n_nodes = k + 1
        return k

    cdef int _reserve_text(self, Py_ssize_t n) except -1:
        return _grow(&self.text_buf, &self.text_cap, n)

    cdef unsigned long long _hash_value(self, const unsigned char *data, Py_ssize_t n) except? 0:
        """`_hash` as a C integer: by the loaded XXH3 function, else by `hash64`."""
        if _xxh3 != NULL:
            return _xxh3(data, n)
        return PyLong_AsUnsignedLongLong(self.hash64(PyBytes_FromStringAndSize(<const char *>data, n)))

    cdef object _hash(self, const unsigned char *data, Py_ssize_t n):
        """XXH3-64 of n bytes, as keys.segment_key computes it."""
        return PyLong_FromUnsignedLongLong(self._hash_value(data, n))

    cdef _Tag _tag(self, void *node, uintptr_t tid):
        """The element's name, kind and inherited bits; None for nodes that are not elements."""
        cdef _Tag info
        cdef size_t length = 0
        cdef const unsigned char *name
        if tid < N_CACHED:
            info = <_Tag>self.cached[tid]
            if info is not None:
                return info
        if _type(node) != ELEMENT:
            return None  # comments, processing instructions, CDATA
        name = _element_name(node, &length)
        if name == NULL:
            return None
        info = _Tag()
        info.name = PyUnicode_DecodeUTF8(<const char *>name, length, "replace")
        info.utf8 = info.name.encode()
        info.kind = SKIP if info.name in self.skip_tags else BLOCK if info.name in self.block_tags else INLINE
        info.bits = self.inherit.get(info.name, 0)
        info.line = info.kind == INLINE and info.name in self.line_tags
        info.glue = info.name == "wbr"
        info.body = info.name == "body"
        info.group = self.tag_groups.get(info.name, self.other_group)
        if tid < N_CACHED:
            self.cached[tid] = info
        return info

    cdef tuple _class_id(self, void *element, bint body):
        """The hint bits and layout form (UTF-8) of a layout element's class and id: (0, b"")
        without either; else as `hints` and `layout_classes` give them for the decoded pair
        (a body's classes have no layout form), looked up by the bytes' hash."""
        cdef size_t cls_len = 0, id_len = 0
        cdef const unsigned char *cls
        cdef const unsigned char *ident
        _class_and_id(element, &cls, &cls_len, &ident, &id_len)
        if cls_len == 0 and id_len == 0:
            return _NO_CLASS_ID
        cdef Py_ssize_t n = cls_len + 2 + id_len
        _grow(&self.cbuf, &self.ccap, n)
        if cls_len:
            memcpy(self.cbuf, cls, cls_len)
        self.cbuf[cls_len] = 0
        if id_len:
            memcpy(self.cbuf + cls_len + 1, ident, id_len)
        self.cbuf[n - 1] = 1 if body else 0  # a body's entry has no layout form
        cdef unsigned long long key = self._hash_value(self.cbuf, n)
        cdef unsigned int at
        if self.class_slots == NULL:
            self.class_keys = <unsigned long long *>calloc(CLASS_ID_SLOTS, sizeof(unsigned long long))
            self.class_slots = <unsigned int *>calloc(CLASS_ID_SLOTS, sizeof(unsigned int))
            if self.class_keys == NULL or self.class_slots == NULL:
                raise MemoryError()
        at = _slot(key, CLASS_ID_SLOTS_BITS)
        while self.class_slots[at]:
            if self.class_keys[at] == key:
                return <tuple>self.class_ids[self.class_slots[at] - 1]
            at = (at + 1) & (CLASS_ID_SLOTS - 1)
        decoded_cls = PyUnicode_DecodeUTF8(<const char *>cls, cls_len, "replace") if cls_len else ""
        decoded_id = PyUnicode_DecodeUTF8(<const char *>ident, id_len, "replace") if id_len else ""
        # (this table is the walk's cache of both: the compiled marks keep none of their own)
        bits = self.hints((decoded_cls, decoded_id))
        form = self.layout_classes(decoded_cls) if decoded_cls and not body else ""
        entry = (bits, (<str>form).encode())
        if n <= CLASS_ID_MAX_BYTES:
            if len(self.class_ids) >= CLASS_IDS_MAX:
                self.class_ids = []
                memset(self.class_slots, 0, CLASS_ID_SLOTS * sizeof(unsigned int))
                at = _slot(key, CLASS_ID_SLOTS_BITS)
            self.class_ids.append(entry)
            self.class_keys[at] = key
            self.class_slots[at] = len(self.class_ids)
        return entry

    cdef int _piece(self, const unsigned char *text, Py_ssize_t m, int edges, long anchor) except -1:
        """Add one text node's normalised text (m bytes; m may be 0 for white space) to the open run."""
        cdef Py_ssize_t k = self.pieces
        if k == self.pieces_cap:
            self.pieces_cap = 2 * k + 16
            self.piece_at = <Py_ssize_t *>realloc(self.piece_at, self.pieces_cap * sizeof(Py_ssize_t))
            self.piece_len = <Py_ssize_t *>realloc(self.piece_len, self.pieces_cap * sizeof(Py_ssize_t))
            self.piece_anchor = <long *>realloc(self.piece_anchor, self.pieces_cap * sizeof(long))
            self.piece_edges = <unsigned char *>realloc(self.piece_edges, self.pieces_cap)
            if self.piece_at == NULL or self.piece_len == NULL or self.piece_anchor == NULL or self.piece_edges == NULL:
                raise MemoryError()
        _grow(&self.run_buf, &self.run_cap, self.run_len + m)
        memcpy(self.run_buf + self.run_len, text, m)
        self.piece_at[k] = self.run_len
        self.piece_len[k] = m
        self.piece_anchor[k] = anchor
        self.piece_edges[k] = edges
        self.run_len += m
        self.pieces = k + 1
        return 0

    cdef int _glue(self, long anchor) except -1:
        """Mark that the text on either side of this point is one (a <wbr>, a comment, a
        skipped element): a piece with no text and no white space (page/python.py `glue`)."""
        if self.pieces:
            self._piece(self.text_buf, 0, 0, anchor)
        return 0

    cdef Py_ssize_t _add_text(self, void *text_node, Py_ssize_t blk, Py_ssize_t path_len, object line,
                              long anchor) except -1:
        """Put a text node into the open run of `blk` (whose path is buf[:path_len]); returns
        its length in characters as the cues count text (0 for white space)."""
        cdef lexbor_str *raw = <lexbor_str *>(<char *>text_node + _text_offset)
        cdef Py_ssize_t n = raw.length, m, i, chars
        cdef int edges = 0
        cdef bint ascii = True
        if raw.data == NULL or n == 0:
            return 0
        if not self.pieces:
            self.run_blk = blk
            self.run_path_len = path_len
            self.run_line = line
        self._reserve_text(n)
        m = _normalize(raw.data, n, self.text_buf, &ascii)
        if m == 0:
            self._piece(self.text_buf, 0, 3, anchor)
            return 0
        if _space_len(raw.data, 0, n):
            edges = 1
        # Trailing white space: the normalised text ends before the raw text does, in
        # something other than the last character's own bytes (found from the end).
        i = n - 1
        while i > 0 and (raw.data[i] & 0xC0) == 0x80:
            i -= 1
        if _space_len(raw.data, i, n):
            edges |= 2
        if ascii:
            self._piece(self.text_buf, m, edges, anchor)
            return m
        chars = _utf8_chars(self.text_buf, m)
        if chars >= 0:
            self._piece(self.text_buf, m, edges, anchor)
        else:
            # Bytes lexbor passed through: decode as selectolax does, then split as Python does.
            text = " ".join(PyUnicode_DecodeUTF8(<const char *>raw.data, n, "replace").split())
            utf8 = text.encode()
            chars = len(text)
            self._piece(<const unsigned char *><const char *>utf8, len(utf8), edges, anchor)
        return chars

    cdef bint _plain_words(self) except -1:
        """Whether a piece of the open run outside links holds a letter or digit."""
        cdef Py_ssize_t k, i, at, m
        cdef unsigned char c
        cdef bint ascii
        for k in range(self.pieces):
            if self.piece_anchor[k] >= 0:
                continue
            at = self.piece_at[k]
            m = self.piece_len[k]
            ascii = True
            for i in range(m):
                c = self.run_buf[at + i]
                if c >= 0x80:
                    ascii = False
                elif (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122):
                    return True
            if not ascii and self.has_word(PyUnicode_DecodeUTF8(<const char *>self.run_buf + at, m, "replace")):
                return True
        return False

    cdef int _flush(self) except -1:
        """Close the open run: its segment, or one a link for a run of links (page/python.py)."""
        cdef Py_ssize_t k, start, distinct = 0
        cdef long last = -1
        if not self.pieces:
            return 0
        self.seq_fresh = True
        for k in range(self.pieces):
            if self.piece_anchor[k] >= 0 and self.piece_anchor[k] != last:
                distinct += 1
                last = self.piece_anchor[k]
        if distinct >= 2 and not self._plain_words():
            start = 0
            while start < self.pieces:
                if self.piece_anchor[start] < 0:
                    start += 1
                    continue
                k = start
                while k < self.pieces and self.piece_anchor[k] == self.piece_anchor[start]:
                    k += 1
                self._emit(start, k)
                start = k
        else:
            self._emit(0, self.pieces)
        self.pieces = 0
        self.run_len = 0
        return 0

    cdef int _emit(self, Py_ssize_t first, Py_ssize_t end) except -1:
        """The segment of the open run's pieces [first, end), joined as
        " ".join(join_pieces(raw).split()) (page/python.py)."""
        cdef Py_ssize_t head = self.run_path_len, k, at, m, j, start_text
        cdef bint gap = False, empty = True, glue = False
        line = self.run_line
        cdef Py_ssize_t line_len = len(line) if line is not None else 0
        _grow(&self.key_buf, &self.key_cap, head + 2 + line_len + 2 * self.run_len + self.pieces)
        memcpy(self.key_buf, self.buf, head)
        if line_len:
            self.key_buf[head] = 47  # "/"
            memcpy(self.key_buf + head + 1, <const char *>line, line_len)
            head += 1 + line_len
        self.key_buf[head] = 0
        start_text = j = head + 1
        for k in range(first, end):
            m = self.piece_len[k]
            if m == 0:
                if self.piece_edges[k]:
                    gap = True  # white space
                else:
                    glue = True  # <wbr>
                continue
            at = self.piece_at[k]
            if not empty and (gap or (self.piece_edges[k] & 1) or (
                not glue
                and _word_char_at(self.run_buf, at, at + m)
                and _word_char_at(self.key_buf, _last_char_at(self.key_buf, j), j)
            )):
                # White space between the two nodes, or two elements' words that would run
                # together (page/python.py `join_pieces`).
                self.key_buf[j] = 32
                j += 1
            memcpy(self.key_buf + j, self.run_buf + at, m)
            j += m
            empty = False
            glue = False
            gap = (self.piece_edges[k] & 2) != 0
        if empty:
            return 0
        text = _utf8(<const char *>self.key_buf + start_text, j - start_text, NULL)
        key = self._hash(self.key_buf, j)
        seg = PyType_GenericAlloc(self.segment_type, 3)  # Segment(key, text, chars)
        _put(seg, 0, key)
        _put(seg, 1, text)
        _put(seg, 2, PyLong_FromSsize_t(PyUnicode_GET_LENGTH(text)))
        # An int, a str and an int can be in no reference cycle: keep the collector from
        # visiting each of the page's segments (CPython untracks such tuples too, later).
        PyObject_GC_UnTrack(seg)
        PyList_Append(<list>self.segments[self.run_blk], seg)
        cdef bint in_line
        if self.seq is not None:
            in_line = line_len > 0
            if self.run_blk == self.seq_node and not (
                self.seq_fresh and (in_line or self.seq_in_line or self.seq_break)
            ):
                self.seq_count += 1
            else:  # another block, or a paragraph of its own (page/python.py `walk_python`)
                if self.seq_count:
                    PyList_Append(self.seq, self.seq_node)
                    PyList_Append(self.seq, self.seq_count)
                self.seq_node = self.run_blk
                self.seq_count = 1
            self.seq_fresh = False
            self.seq_in_line = in_line
            self.seq_break = False
        return 0

    cdef int _number_runs(self, list node_of_block) except -1:
        """Close the open (node, count) pair of `seq` and number its nodes as blocks."""
        cdef list seq = self.seq
        cdef Py_ssize_t j, b, nb = len(node_of_block)
        cdef Py_ssize_t *block_of
        if self.seq_count:
            PyList_Append(seq, self.seq_node)
            PyList_Append(seq, self.seq_count)
            self.seq_count = 0
        block_of = <Py_ssize_t *>malloc((len(self.segments) + 1) * sizeof(Py_ssize_t))
        if block_of == NULL:
            raise MemoryError()
        try:
            for b in range(nb):
                block_of[<Py_ssize_t>node_of_block[b]] = b
            for j in range(0, len(seq), 2):
                seq[j] = block_of[<Py_ssize_t>seq[j]]  # a node with segments: one of the blocks
        finally:
            free(block_of)
        self.seq_out.extend(seq)
        return 0

    cdef Py_ssize_t _child_path(self, Py_ssize_t path_len, _Tag info) except -1:
        cdef Py_ssize_t n = len(info.utf8)
        self._reserve(path_len + 1 + n)
        self.buf[path_len] = 47  # "/"
        memcpy(self.buf + path_len + 1, <const char *>info.utf8, n)
        return path_len + 1 + n

    cdef int _layout(self, Py_ssize_t lpath_len, _Tag info, bytes utf8) except -1:
        """A layout element's keys (keys.layout_key): its layout key (the enclosing block's layout
        path in lbuf[1:lpath_len] and its own tag) and its container key (with its classes'
        layout form, `utf8`); leaves its layout path in lbuf and returns its length."""
        cdef Py_ssize_t n = len(info.utf8), m
        m = len(utf8)
        _grow(&self.lbuf, &self.lcap, lpath_len + 1 + n + m)
        self.lbuf[lpath_len] = 47  # "/"
        memcpy(self.lbuf + lpath_len + 1, <const char *>info.utf8, n)
        PyList_Append(self.layout, self._hash(self.lbuf, lpath_len + 1 + n))
        memcpy(self.lbuf + lpath_len + 1 + n, <const char *>utf8, m)
        PyList_Append(self.container, self._hash(self.lbuf, lpath_len + 1 + n + m))
        return lpath_len + 1 + n + m

    cdef int _visit(self, void *node, Py_ssize_t path_len, Py_ssize_t blk, Py_ssize_t blk_path_len,
                    Py_ssize_t lpath_len, Py_ssize_t depth, long inh, long anchor, object line) except -1:
        cdef void *child
        cdef void *first
        cdef uintptr_t tid
        cdef _Tag info
        cdef Py_ssize_t own_chars = 0, own_achars = 0, own_links = 0, n = 0, child_len, target, child_lpath
        cdef long own, inner, child_anchor
        if depth >= self.max_depth:
            raise self.bad_input("too_deep", f"the DOM is nested deeper than {self.max_depth} elements")
        child = _first_child(node)
        while child != NULL:
            tid = _tag_id(child)
            if tid == TEXT_ID:
                n = self._add_text(child, blk, blk_path_len, line, anchor)
                self.total += n
                own_chars += n
                child = _next(child)
                continue
            info = self._tag(child, tid)
            if info is None or info.kind == SKIP:
                self._glue(anchor)  # a comment or a skipped element
                child = _next(child)
                continue
            self.budget -= 1
            if self.budget < 0:
                raise self.bad_input("too_many_nodes", f"the DOM has more than {self.max_nodes:,} elements")
            child_anchor = anchor
            if info.bits & F_IN_A:
                own_links += 1
                href = _attr_str(child, b"href", 4)
                if href:
                    PyList_Append(self.anchors, (blk, href))
                if anchor < 0:
                    child_anchor = self.anchor_ids
                    self.anchor_ids += 1
            first = _first_child(child)
            if first == NULL:
                if info.line:  # <br>, <hr>
                    self._flush()
                    self.seq_break = True  # the text after it is a line of its own
                elif info.glue:
                    self._glue(anchor)
                child = _next(child)
                continue
            child_len = self._child_path(path_len, info)
            own = 0
            form = b""
            if info.kind == BLOCK and self.cues:
                # The body's classes name the page's type, not its layout (see page/python.py).
                own, form = self._class_id(child, info.body)
            inner = inh | (own << 2) | info.bits
            if info.kind == BLOCK:
                self._flush()  # a nested layout element ends the enclosing block's run
                target = self._add_node(blk, depth, own | (inh & ~F_IN_A), info.group, child_len)
                PyList_Append(self.tags, info.name)
                PyList_Append(self.segments, [])
                child_lpath = self._layout(lpath_len, info, form) if self.cues else 0
                if _next(first) == NULL and _tag_id(first) == TEXT_ID:
                    # A leaf block: no visit, so no depth check (as the Python walk does).
                    n = self._add_text(first, target, child_len, None, child_anchor)
                    self.total += n
                    self.nodes[target].chars = n
                    if inner & F_IN_A:
                        self.nodes[target].achars = n
                else:
                    self._visit(child, child_len, target, child_len, child_lpath, depth + 1, inner, child_anchor, None)
                    self.nodes[target].ends = self.n_nodes
                self._flush()
                child = _next(child)
                continue
            child_line = line
            if info.line:
                self._flush()
                child_line = info.utf8
            if _next(first) == NULL and _tag_id(first) == TEXT_ID:
                n = self._add_text(first, blk, blk_path_len, child_line, child_anchor)
                self.total += n
                own_chars += n
                if inner & F_IN_A:
                    own_achars += n
            else:
                self._visit(child, child_len, blk, blk_path_len, lpath_len, depth + 1, inner, child_anchor, child_line)
            if info.line:
                self._flush()
            child = _next(child)
        if own_chars:
            self.nodes[blk].chars += own_chars
            if inh & F_IN_A:
                self.nodes[blk].achars += own_chars
            elif own_achars:
                self.nodes[blk].achars += own_achars
        if own_links:
            self.nodes[blk].links += own_links
        return 0

    def walk(self, Py_ssize_t root, Py_ssize_t max_depth, Py_ssize_t max_nodes, bint cues, list runs=None):
        """Walk the tree under the element at address `root` (a selectolax node's mem_id).

        With `cues`, returns the fields of a `page.tree.PageTree` as a tuple
        (blocks, node_of_block, parent, tag, depth, start, chars, achars, segs, links,
        flags, text, end, layout, container, stats, columns); without, only the blocks (what
        `segment_tree` returns), and the class/id hints and layout paths are not read.
        `runs`, when given (empty), receives the segments' document order (page/python.py
        `walk_python`).
        """
        if _text_offset < 0:
            raise RuntimeError("detemplate.engine.page._walk.init() has not succeeded")
        cdef void *node = <void *><uintptr_t>root
        cdef _Tag info = self._tag(node, _tag_id(node))
        name = info.name if info is not None and info.name else "html"
        self.cues = cues
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.budget = max_nodes
        self.total = 0
        self.tags = [name]
        self.segments = [[]]
        self.anchors = []
        self.n_nodes = 0
        self.pbuf_len = 0
        self.pieces = 0
        self.run_len = 0
        self.anchor_ids = 0
        self.seq_out = runs
        self.seq = [] if runs is not None else None  # handed over only when the walk ends well
        self.seq_node = -1
        self.seq_count = 0
        self.seq_fresh = False
        self.seq_in_line = False
        self.seq_break = False
        cdef bytes utf8 = name.encode()
        self._reserve(len(utf8) + 1)
        memcpy(self.buf, <const char *>utf8, len(utf8))
        self._add_node(-1, 0, 0, self.tag_groups.get(name, self.other_group), len(utf8))  # the root
        _grow(&self.lbuf, &self.lcap, len(utf8) + 1)
        self.lbuf[0] = 1  # keys.layout_key hashes its path after a \x01 byte
        memcpy(self.lbuf + 1, <const char *>utf8, len(utf8))
        root_key = self._hash(self.lbuf, len(utf8) + 1)
        self.layout = [root_key]
        self.container = [root_key]
        try:
            self._visit(node, len(utf8), 0, len(utf8), len(utf8) + 1, 1, 0, -1, None)
            self._flush()
            self.nodes[0].ends = self.n_nodes
            return self._finish()
        finally:
            self.tags = self.segments = self.anchors = None
            self.n_nodes = 0
            self.pbuf_len = 0
            self.layout = self.container = None
            self.seq = self.seq_out = None
            self.pieces = 0
            self.run_len = 0

    cdef object _finish(self):
        """The blocks with text, numbered in document order, each with its links (see
        `page.tree.block_links`), and with `cues` the rest of the PageTree."""
        cdef list segments = self.segments
        cdef _Node *nodes = self.nodes
        cdef Py_ssize_t n = self.n_nodes, i, p, o, k = 0
        cdef Py_ssize_t *owner
        cdef list hrefs = None  # by node: its links, or None
        cdef list blocks = []
        cdef list node_of_block = []
        cdef list texts
        cdef list segs
        if self.anchors:
            # A text-less block's links go to its nearest enclosing block with text (-1: none).
            owner = <Py_ssize_t *>malloc((n + 1) * sizeof(Py_ssize_t))
            if owner == NULL:
                raise MemoryError()
            hrefs = [None] * n
            try:
                for i in range(n):
                    if segments[i]:
                        owner[i] = i
                    else:
                        p = nodes[i].parent
                        owner[i] = owner[p] if p >= 0 else -1
                for blk, href in self.anchors:
                    o = owner[<Py_ssize_t>blk]
                    if o >= 0:
                        lst = hrefs[o]
                        if lst is None:
                            hrefs[o] = [href]
                        else:
                            (<list>lst).append(href)
            finally:
                free(owner)
        block_type = self.block_type
        for i in range(n):
            segs = <list>segments[i]
            if segs:
                hrefs_of = () if hrefs is None or hrefs[i] is None else hrefs[i]
                block = PyType_GenericAlloc(block_type, 4)  # Block(path, segments, order, links)
                _put(block, 0, _utf8(<const char *>self.pbuf + nodes[i].path_at, nodes[i].path_len, NULL))
                _put(block, 1, segs)
                _put(block, 2, PyLong_FromSsize_t(k))
                _put(block, 3, hrefs_of)
                blocks.append(block)
                node_of_block.append(i)
                k += 1
        if self.seq is not None:
            self._number_runs(node_of_block)
        if not self.cues:
            return blocks
        # Each node's text (its segments joined by spaces; one segment's is its own str, as
        # join gives it), its segment count and its text statistics.
        texts = PyList_New(n)
        cdef list seg_counts = PyList_New(n)
        cdef array.array stats = array.clone(_DOUBLES, n * N_STATS, zero=True)
        cdef Py_ssize_t m
        for i in range(n):
            segs = <list>segments[i]
            m = len(segs)
            if m == 0:
                text = ""
            elif m == 1:
                text = (<tuple>segs[0])[1]
            else:
                text = " ".join([(<tuple>seg)[1] for seg in segs])
            Py_INCREF(text)  # SET_ITEM takes the reference it is given
            PyList_SET_ITEM(texts, i, text)
            _put_item(seg_counts, i, m)
            if m:
                self._text_stats(segs, <str>text, stats.data.as_doubles + i * N_STATS)
        # The numeric columns as one array (page/tree.py NODE_COLUMNS), so numpy need not
        # convert ten lists of Python ints.
        cdef array.array columns = array.clone(_DOUBLES, n * N_COLUMNS, zero=False)
        cdef double *row
        cdef list tags = self.tags
        cdef list parent = PyList_New(n), depth = PyList_New(n), start = PyList_New(n), chars = PyList_New(n)
        cdef list achars = PyList_New(n), node_links = PyList_New(n), flags = PyList_New(n), ends = PyList_New(n)
        cdef _Node *node
        for i in range(n):
            node = &nodes[i]
            _put_item(parent, i, node.parent)
            _put_item(depth, i, node.depth)
            _put_item(start, i, node.start)
            _put_item(chars, i, node.chars)
            _put_item(achars, i, node.achars)
            _put_item(node_links, i, node.links)
            _put_item(ends, i, node.ends)
            _put_item(flags, i, node.flags)
            row = columns.data.as_doubles + i * N_COLUMNS
            row[0] = node.parent
            row[1] = node.chars
            row[2] = node.achars
            row[3] = node.links
            row[4] = len(<list>segments[i])
            row[5] = node.ends
            row[6] = node.start
            row[7] = node.depth
            row[8] = node.flags
            row[9] = node.group
        # The main text (tree.py `main_block`): the block with the most plain (non-link)
        # characters, the first of equals; -1 (asked later) on a page without blocks.
        cdef Py_ssize_t main = -1, plain, most = -1
        for k in range(len(node_of_block)):
            i = <Py_ssize_t>node_of_block[k]
            plain = nodes[i].chars - nodes[i].achars
            if plain > most:
                most = plain
                main = k
        return (blocks, node_of_block, parent, tags, depth, start, chars, achars, seg_counts, node_links, flags,
                texts, ends, self.layout, self.container, stats, columns, main,
                _distinct_keys(segments))

    cdef int _text_stats(self, list segs, str text, double *out) except -1:
        """cues.TextStats for one node's direct text (its segments joined by spaces): one pass
        over each segment's characters, in the str's own width (`_segment_stats`).

        out: spaces, punctuation, sentence ends, digits, capitals starting a word, pipes,
        commas, ends with a closer, holds a copyright mark, stopwords.
        """
        cdef Py_ssize_t k, m, nseg = len(segs)
        cdef int kind
        cdef void *data
        cdef Py_UCS4 last = 0
        cdef double acc[N_STATS]
        cdef bint maybe_mark = False
        memset(acc, 0, sizeof(acc))
        acc[0] = nseg - 1  # the spaces that join the segments
        for k in range(nseg):
            seg_text = (<tuple>segs[k])[1]
            kind = PyUnicode_KIND(seg_text)
            data = PyUnicode_DATA(seg_text)
            m = PyUnicode_GET_LENGTH(seg_text)
            if kind == PyUnicode_1BYTE_KIND:
                maybe_mark |= _segment_stats(<const Py_UCS1 *>data, m, <str>seg_text, self, acc)
            elif kind == PyUnicode_2BYTE_KIND:
                maybe_mark |= _segment_stats(<const Py_UCS2 *>data, m, <str>seg_text, self, acc)
            else:
                maybe_mark |= _segment_stats(<const uint32_t *>data, m, <str>seg_text, self, acc)
            if m:
                last = PyUnicode_READ(kind, data, m - 1)
        memcpy(out, acc, 7 * sizeof(double))
        out[7] = 0.0
        for k in range(self.n_closers):
            if last == self.closer_codes[k]:
                out[7] = 1.0
                break
        # A mark needs a "©" or a "right": a text with neither is not searched.
        out[8] = 1.0 if maybe_mark and _copyright_mark(
            PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)) else 0.0
        out[9] = acc[9]
        return 0


ctypedef fused ucs_t:
    Py_UCS1
    Py_UCS2
    uint32_t


cdef inline bint _is_space(uint32_t c) noexcept nogil:
    """Py_UNICODE_ISSPACE (what str.split parts words at), without a call past ASCII."""
    if c < 128:
        return c == 32 or 9 <= c <= 13 or 28 <= c <= 31
    if c < 0x1680:
        return c == 0x85 or c == 0xA0
    return c == 0x1680 or 0x2000 <= c <= 0x200A or c == 0x2028 or c == 0x2029 or c == 0x202F \
        or c == 0x205F or c == 0x3000


def is_space(uint32_t c):
    """`_is_space`, for tests (it must be str.isspace on every code point)."""
    return _is_space(c)


cdef int _segment_stats(const ucs_t *data, Py_ssize_t m, str seg, Walker w, double *acc) except -1:
    """Add one segment's counts to acc (Walker._text_stats' columns; acc[9]: stopwords, as
    counted among `text.lower().split()`): character classes by the walker's table, and its
    words, parted at Unicode white space as split does, each looked up among the stopwords
    when it ends (`_is_stopword`). Returns whether the segment holds a "©" or "right" in any
    case of A-Z (both copyright marks hold one of them, and neither crosses the space between
    two segments: without one, the text holds no mark)."""
    cdef const unsigned char *lut = <const unsigned char *>w.lut
    cdef Py_ssize_t j, start = 0
    cdef uint32_t ch, nxt
    cdef unsigned char cls, prev_cls = C_BOUNDARY  # a segment follows the node's start or a joining space
    cdef Py_ssize_t space = 0, punct = 0, sent = 0, digit = 0, upper = 0, pipe = 0, comma = 0, stop = 0
    cdef bint in_word = False, ascii = True, mark = False
    for j in range(m):
        ch = data[j]
        if 97 <= ch <= 122 and ch != 103:
            # Most of a text: a lower-case ASCII letter other than "g" (the middle of a
            # "right", looked for as a copyright mark) has no class, is no space and no
            # mark; it is only part of a word.
            prev_cls = 0
            if not in_word:
                in_word = True
                start = j
                ascii = True
            continue
        cls = lut[ch if ch < LUT_SIZE else LUT_SIZE]
        if cls:
            if cls & C_SPACE:
                space += 1
            if cls & C_PUNCT:
                punct += 1
            if cls & C_SENT:
                if j + 1 == m:
                    sent += 1
                else:
                    nxt = data[j + 1]
                    if lut[nxt if nxt < LUT_SIZE else LUT_SIZE] & C_BOUNDARY:
                        sent += 1
            if cls & C_DIGIT:
                digit += 1
            if (cls & C_UPPER) and (prev_cls & C_BOUNDARY):
                upper += 1
            if cls & C_PIPE:
                pipe += 1
            if cls & C_COMMA:
                comma += 1
        prev_cls = cls
        if _is_space(ch):
            if in_word:
                stop += _is_stopword(data, start, j, ascii, seg, w)
                in_word = False
            continue
        if not in_word:
            in_word = True
            start = j
            ascii = True
        if ch == 0xA9 or ((ch == 103 or ch == 71) and not mark
                          and _matches_lower_ucs(sizeof(ucs_t), <void *>data, m, j - 2, b"right", 5)):
            mark = True
        if ch >= 128:
            ascii = False
    if in_word:
        stop += _is_stopword(data, start, m, ascii, seg, w)
    acc[0] += space
    acc[1] += punct
    acc[2] += sent
    acc[3] += digit
    acc[4] += upper
    acc[5] += pipe
    acc[6] += comma
    acc[9] += stop
    return mark


cdef inline int _is_stopword(const ucs_t *data, Py_ssize_t start, Py_ssize_t end, bint ascii, str seg,
                             Walker w) except -1:
    """Whether the word data[start:end] of `seg`, lower-cased, is a stopword. No word longer
    than every stopword is one (lower-casing never shortens a word). An ASCII word is
    lower-cased and packed little-endian into one integer, looked up among the packed
    stopwords (a NUL would pack like the end of a shorter word: no stopword holds one); any
    other word is lower-cased by Python and looked up in the set."""
    cdef unsigned long long word = 0, c
    cdef Py_ssize_t k
    if end - start > w.max_stop_len:
        return 0
    if not ascii:
        return PyUnicode_Substring(seg, start, end).lower() in w.stopwords
    if end - start > 8:
        return 0
    for k in range(start, end):
        c = data[k]
        if c == 0:
            return 0
        if 65 <= c <= 90:
            c += 32
        word |= c << (8 * (k - start))
    return _in_table(w.stop_table, word)


# -- the page-level model's features ---------------------------------------------------------

def page_features(double[:, ::1] X, const double[:, ::1] cols, const double[:, ::1] counts,
                  const long long[::1] flag_bits, const double[::1] char_edges,
                  const double[::1] anchor_edges, const double[::1] pos_edges, Py_ssize_t n_tags,
                  const Py_ssize_t[::1] log_cols, double[:, ::1] logs):
    """detectors/pagelevel.py `features` (the reference), row by row, into X (n rows).

    cols: the node columns (page/tree.py NODE_COLUMNS), counts: the text statistics
    (TEXT_COLUMNS). The same floating-point operations in the same order as the numpy
    code, so the same doubles, with one exception: the columns that numpy takes log1p of
    (log_chars, log_sub_chars, log_avg_seg, log_segs, log_children, log_words,
    prev_log_chars, next_log_chars: `log_cols`) are left holding log1p's argument, for the
    caller to take with numpy's log1p (whose SIMD results differ from libm's in the last
    bit); those arguments are also copied into `logs` (n rows, a column for each of
    `log_cols`), so that numpy's log1p goes over one contiguous array and `put_columns`
    writes its results back. Sums over nodes (subtrees, siblings) add in node
    order, as numpy's cumsum and bincount do. Returns the number of columns written.
    """
    cdef Py_ssize_t n = cols.shape[0], m = X.shape[1], i, j, k, col = 0, p, top = 0, g, prev = -1
    cdef Py_ssize_t n_flags = flag_bits.shape[0], n_char = char_edges.shape[0]
    cdef Py_ssize_t n_anchor = anchor_edges.shape[0], n_pos = pos_edges.shape[0]
    if n == 0:
        return 0
    if X.shape[0] != n or counts.shape[0] != n or cols.shape[1] < N_COLUMNS or counts.shape[1] < N_STATS:
        raise ValueError("features: the arrays do not fit")
    if 25 + n_tags + n_flags + n_char + n_anchor + n_pos + 3 + 5 + 4 + 4 + 1 != m:
        raise ValueError("features: X has the wrong number of columns")
    cdef double *work = <double *>malloc((13 * n + 3) * sizeof(double))
    if work == NULL:
        raise MemoryError()
    cdef double *acc_c = work  # n + 1 each: prefix sums
    cdef double *acc_a = work + (n + 1)
    cdef double *acc_l = work + 2 * (n + 1)
    cdef double *sub_c = work + 3 * (n + 1)
    cdef double *sub_a = sub_c + n
    cdef double *anchor = sub_c + 2 * n
    cdef double *sub_anchor = sub_c + 3 * n
    cdef double *sib_c = sub_c + 4 * n
    cdef double *sib_a = sub_c + 5 * n
    cdef double *score1 = sub_c + 6 * n
    cdef double *score2 = sub_c + 7 * n
    cdef double *vote = sub_c + 8 * n
    cdef double *children = sub_c + 9 * n
    cdef double c, a, s, d, st, sl, total, words, nw, length, plain, plain_max, best, main_start, main_end
    cdef double pos, sa, sc
    cdef long long f
    cdef bint in_main
    cdef double *row
    try:
        acc_c[0] = acc_a[0] = acc_l[0] = 0.0
        for i in range(n):
            acc_c[i + 1] = acc_c[i] + cols[i, 1]
            acc_a[i + 1] = acc_a[i] + cols[i, 2]
            acc_l[i + 1] = acc_l[i] + cols[i, 3]
            sib_c[i] = sib_a[i] = score1[i] = score2[i] = children[i] = 0.0
        for i in range(n):
            k = <Py_ssize_t>cols[i, 5]
            sub_c[i] = acc_c[k] - acc_c[i]
            sub_a[i] = acc_a[k] - acc_a[i]
            c = cols[i, 1]
            anchor[i] = cols[i, 2] / (c if c > 1.0 else 1.0) if c > 0 else 0.0
            sub_anchor[i] = sub_a[i] / (sub_c[i] if sub_c[i] > 1.0 else 1.0)
            plain = c - cols[i, 2]
            if plain >= 25 and anchor[i] < 0.5:
                vote[i] = 1.0 + (plain / 100.0 if plain / 100.0 < 3.0 else 3.0) + 0.5 * (
                    counts[i, 6] if counts[i, 6] < 5.0 else 5.0)
            else:
                vote[i] = 0.0
        for j in range(1, n):
            p = <Py_ssize_t>cols[j, 0]
            if p < 0:
                p = 0
            children[p] += 1.0
            sib_c[p] += sub_c[j]
            sib_a[p] += sub_a[j]
            score1[p] += vote[j]
            g = <Py_ssize_t>cols[p, 0]
            score2[g if g > 0 else 0] += 0.5 * vote[j]
        best = score1[0] + score2[0]
        for k in range(1, n):
            if score1[k] + score2[k] > best:
                best = score1[k] + score2[k]
                top = k
        if not best > 0:
            top = 0
        total = sub_c[0] if sub_c[0] > 1.0 else 1.0
        main_start = cols[top, 6]
        main_end = cols[top, 6] + sub_c[top]
        plain_max = cols[0, 1] - cols[0, 2]
        for i in range(1, n):
            if cols[i, 1] - cols[i, 2] > plain_max:
                plain_max = cols[i, 1] - cols[i, 2]
        if plain_max < 1.0:
            plain_max = 1.0
        for i in range(n):
            row = &X[i, 0]
            c = cols[i, 1]
            a = cols[i, 2]
            s = cols[i, 4]
            st = cols[i, 6]
            d = cols[i, 7]
            f = <long long>cols[i, 8]
            p = <Py_ssize_t>cols[i, 0]
            sc = sub_c[i]
            sa = sub_anchor[i]
            sl = acc_l[<Py_ssize_t>cols[i, 5]] - acc_l[i]
            row[0] = c  # log1p by the caller
            row[1] = sc  # log1p
            row[2] = anchor[i]
            row[3] = sa
            row[4] = cols[i, 3] * 50.0 / (c + 50.0)
            row[5] = sl * 50.0 / (sc + 50.0)
            row[6] = c / (s if s > 1.0 else 1.0)  # log1p
            row[7] = s  # log1p
            row[8] = sc / total
            pos = st / total
            row[9] = pos
            row[10] = (st + sc) / total
            row[11] = (d if d < 40.0 else 40.0) / 40.0
            row[12] = children[i]  # log1p
            row[13] = 1.0 if c > 0 else 0.0
            # The direct text's statistics.
            length = c if c > 1.0 else 1.0
            words = counts[i, 0] + 1.0 if c > 0 else 0.0
            nw = words if words > 1.0 else 1.0
            row[14] = counts[i, 1] / length
            row[15] = counts[i, 2] * 100.0 / (c + 100.0)
            row[16] = words  # log1p
            row[17] = ((c / nw if c / nw < 20.0 else 20.0) / 10.0) if c > 0 else 0.0
            row[18] = counts[i, 3] / length
            row[19] = counts[i, 4] / nw
            row[20] = counts[i, 8]
            row[21] = counts[i, 5] / nw
            # The parent's link density and weight, the siblings' link density.
            if p >= 0:
                row[22] = sub_anchor[p]
                row[23] = sub_c[p] / total
                row[24] = (sib_a[p] - sub_a[i]) / (
                    sib_c[p] - sc if sib_c[p] - sc > 1.0 else 1.0)
            else:
                row[22] = 0.0
                row[23] = 1.0
                row[24] = 0.0
            col = 25
            for k in range(n_tags):
                row[col + k] = 0.0
            g = <Py_ssize_t>cols[i, 9]
            if 0 <= g < n_tags:
                row[col + g] = 1.0
            col += n_tags
            for k in range(n_flags):
                row[col + k] = 1.0 if f & flag_bits[k] else 0.0
            col += n_flags
            for k in range(n_char):
                row[col + k] = 1.0 if c >= char_edges[k] else 0.0
            col += n_char
            for k in range(n_anchor):
                row[col + k] = 1.0 if sa >= anchor_edges[k] else 0.0
            col += n_anchor
            for k in range(n_pos):
                row[col + k] = 1.0 if pos >= pos_edges[k] else 0.0
            col += n_pos
            row[col] = sa if sc < 80 else 0.0
            row[col + 1] = sa if sc >= 80 else 0.0
            row[col + 2] = 1.0 if (f & (F_THINT | F_IN_THINT)) and (f & F_IN_LIST) else 0.0
            col += 3
            # The main-content candidate.
            in_main = top <= i < <Py_ssize_t>cols[top, 5]
            row[col] = 1.0 if in_main else 0.0
            row[col + 1] = 1.0 if st + sc <= main_start and not in_main else 0.0
            row[col + 2] = 1.0 if st >= main_end and not in_main else 0.0
            row[col + 3] = sub_c[top] / total
            row[col + 4] = 1.0 if top == 0 else 0.0
            col += 5
            # Neighbouring text blocks in document order (filled in below).
            row[col] = row[col + 1] = row[col + 2] = row[col + 3] = 0.0
            if c > 0:
                if prev >= 0:
                    row[col] = cols[prev, 1]  # log1p
                    row[col + 1] = anchor[prev]
                    X[prev, col + 2] = c  # log1p
                    X[prev, col + 3] = anchor[i]
                prev = i
            col += 4
            row[col] = (c - a) / plain_max
            row[col + 1] = ((d - cols[top, 7] if d - cols[top, 7] < 10.0 else 10.0) / 10.0) if in_main else -1.0
            row[col + 2] = counts[i, 7]
            row[col + 3] = counts[i, 9] / nw
            row[col + 4] = 1.0
        _copy_columns(X, logs, log_cols, True, "features")
    finally:
        free(work)
    return col + 5


def put_columns(double[:, ::1] X, const Py_ssize_t[::1] columns, double[:, ::1] values):
    """X[:, columns] = values, for numpy's log1p of `page_features`' log columns."""
    _copy_columns(X, values, columns, False, "put_columns")
    return None


cdef int _copy_columns(double[:, ::1] wide, double[:, ::1] narrow, const Py_ssize_t[::1] columns, bint to_narrow,
                       str who) except -1:
    """narrow[:, k] = wide[:, columns[k]] (`to_narrow`), else wide[:, columns[k]] = narrow[:, k];
    the arrays and columns checked first (`who` names the caller in the error)."""
    cdef Py_ssize_t n = wide.shape[0], m = wide.shape[1], c = columns.shape[0], i, k
    if narrow.shape[0] != n or narrow.shape[1] != c:
        raise ValueError(f"{who}: the arrays do not fit")
    for k in range(c):
        if not 0 <= columns[k] < m:
            raise ValueError(f"{who}: a column is out of range")
    for i in range(n):
        for k in range(c):
            if to_narrow:
                narrow[i, k] = wide[i, columns[k]]
            else:
                wide[i, columns[k]] = narrow[i, k]
    return 0


cdef inline double _sigmoid(double z, double offset) noexcept nogil:
    """1 / (1 + exp(-clip(z - offset, -30, 30))) (NaN stays NaN, as numpy's clip leaves it)."""
    z = z - offset
    if z < -30.0:
        z = -30.0
    elif z > 30.0:
        z = 30.0
    return 1.0 / (1.0 + exp(-z))


def row_scores(const double[:, ::1] X, const double[::1] weights, double offset, double[::1] out, list rows=None):
    """detectors/pagelevel.py `PageLevelModel.scores` (the reference) into out, a value for
    each of `rows` (indices into X; all of X's rows when None): 1 / (1 + exp(-clip(z - offset,
    -30, 30))), z the sum of X[i, j] * weights[j] added in column order (as numpy's cumsum adds
    them), exp libm's (as Python's math.exp), so the same doubles. Four rows at a time: each
    row's sum keeps its order, the four run side by side (one sum waits on its last addition;
    four fill the pipeline)."""
    cdef Py_ssize_t n = X.shape[0], m = X.shape[1], k = 0, j, count, i
    cdef Py_ssize_t r0, r1, r2, r3
    cdef double a0, a1, a2, a3, w
    cdef Py_ssize_t *at
    count = n if rows is None else len(rows)
    if weights.shape[0] != m or out.shape[0] != count:
        raise ValueError("row_scores: the arrays do not fit")
    if count == 0:
        return None
    if m == 0:
        raise ValueError("row_scores: X has no columns")
    at = <Py_ssize_t *>malloc(count * sizeof(Py_ssize_t))
    if at == NULL:
        raise MemoryError()
    try:
        for k in range(count):
            i = k if rows is None else <Py_ssize_t>rows[k]
            if not 0 <= i < n:
                raise ValueError("row_scores: a row is out of range")
            at[k] = i
        k = 0
        while k + 4 <= count:
            r0, r1, r2, r3 = at[k], at[k + 1], at[k + 2], at[k + 3]
            w = weights[0]
            a0 = X[r0, 0] * w
            a1 = X[r1, 0] * w
            a2 = X[r2, 0] * w
            a3 = X[r3, 0] * w
            for j in range(1, m):
                w = weights[j]
                a0 = a0 + X[r0, j] * w
                a1 = a1 + X[r1, j] * w
                a2 = a2 + X[r2, j] * w
                a3 = a3 + X[r3, j] * w
            out[k] = _sigmoid(a0, offset)
            out[k + 1] = _sigmoid(a1, offset)
            out[k + 2] = _sigmoid(a2, offset)
            out[k + 3] = _sigmoid(a3, offset)
            k += 4
        while k < count:
            r0 = at[k]
            a0 = X[r0, 0] * weights[0]
            for j in range(1, m):
                a0 = a0 + X[r0, j] * weights[j]
            out[k] = _sigmoid(a0, offset)
            k += 1
    finally:
        free(at)
    return None


# -- pagelets: the cut, the fingerprinted ones, their min-hash keys ---------------------------
# detectors/pagelets.py `page_sketches_python` and `sketch_keys` (numpy) are the reference.


def pagelet_rows(list parent, list end, list links, list chars, list achars, list node_of_block, list blocks,
                 Py_ssize_t k, Py_ssize_t min_links, double min_anchor):
    """`block_pagelets` (Definition 2 over the block tree) and `page_sketches`' choice of
    the pagelets to fingerprint, over a PageTree's lists.

    Returns (pagelets with text, [(order, node, first block, end block, links)] of those
    fingerprinted, their segment keys in document order, where each one's keys start).
    """
    cdef Py_ssize_t n = len(end), nb = len(node_of_block), i, v, e, p, node, node_end, nlinks, first, last
    cdef Py_ssize_t count = 0
    cdef list rows = [], keys = [], starts = []
    if n == 0:
        return 0, rows, keys, starts
    if len(parent) != n or len(links) != n or len(chars) != n or len(achars) != n or len(blocks) != nb:
        raise ValueError("pagelet_rows: the lists do not fit")
    cdef Py_ssize_t *work = <Py_ssize_t *>malloc((4 * (n + 1) + nb) * sizeof(Py_ssize_t))
    if work == NULL:
        raise MemoryError()
    cdef Py_ssize_t *acc_l = work
    cdef Py_ssize_t *acc_c = work + (n + 1)
    cdef Py_ssize_t *acc_a = work + 2 * (n + 1)
    cdef Py_ssize_t *split = work + 3 * (n + 1)
    cdef Py_ssize_t *nob = work + 4 * (n + 1)
    try:
        acc_l[0] = acc_c[0] = acc_a[0] = 0
        for i in range(n):
            acc_l[i + 1] = acc_l[i] + <Py_ssize_t>links[i]
            acc_c[i + 1] = acc_c[i] + <Py_ssize_t>chars[i]
            acc_a[i + 1] = acc_a[i] + <Py_ssize_t>achars[i]
            split[i] = 0
        for i in range(nb):
            nob[i] = <Py_ssize_t>node_of_block[i]
        # An element is split when one of its children holds k links or more.
        if acc_l[n] >= k:
            for i in range(n):
                p = <Py_ssize_t>parent[i]
                e = <Py_ssize_t>end[i]
                if p >= 0 and acc_l[e] - acc_l[i] >= k:
                    split[p] = 1
        v = 0
        while v < n:
            if split[v]:
                node, node_end, nlinks = v, v + 1, <Py_ssize_t>links[v]
                v += 1
                if not acc_c[node_end] > acc_c[node]:
                    continue
            else:
                e = <Py_ssize_t>end[v]
                node, node_end, nlinks = v, e, acc_l[e] - acc_l[v]
                v = e
                if not acc_c[node_end] > acc_c[node]:
                    continue
            count += 1
            if nlinks < min_links:
                continue
            if min_anchor and (acc_a[node_end] - acc_a[node]) < min_anchor * (acc_c[node_end] - acc_c[node]):
                continue
            first = _bisect_left(nob, 0, nb, node)
            last = _bisect_left(nob, first, nb, node_end)
            if first == last:
                continue  # text, but no segment to fingerprint (a link run's separators alone)
            rows.append((count - 1, node, first, last, nlinks))
            starts.append(len(keys))
            for i in range(first, last):
                for seg in <list>(<tuple>blocks[i])[1]:
                    keys.append((<tuple>seg)[0])
    finally:
        free(work)
    return count, rows, keys, starts


def sketch_keys1(list keys, list starts, Py_ssize_t size, bytes perm_a, bytes perm_b, bytes salt,
                 unsigned long long keep, unsigned long long tag):
    """detectors/pagelets.py `sketch_keys` for w = 1: per group of keys (group i is
    keys[starts[i]:starts[i+1]], none empty), `size` min-hashes min(a*h + b) (mod 2^64),
    each XORed with its salt and tagged ((x & keep) | tag); a tuple a group."""
    cdef Py_ssize_t n = len(keys), groups = len(starts), g, i, j, lo, hi
    cdef const unsigned long long *a = <const unsigned long long *><const char *>perm_a
    cdef const unsigned long long *b = <const unsigned long long *><const char *>perm_b
    cdef const unsigned long long *s = <const unsigned long long *><const char *>salt
    cdef unsigned long long low, x
    if size * 8 > len(perm_a) or size * 8 > len(perm_b) or size * 8 > len(salt):
        raise ValueError("not enough permutations")
    cdef array.array held = array.array("Q", keys)
    cdef unsigned long long *h = held.data.as_ulonglongs
    out = []
    for g in range(groups):
        lo = starts[g]
        hi = starts[g + 1] if g + 1 < groups else n
        if not 0 <= lo < hi <= n:
            raise ValueError("sketch_keys1: an empty or misplaced group")
        row = PyTuple_New(size)
        for j in range(size):
            low = 0xFFFFFFFFFFFFFFFFULL
            for i in range(lo, hi):
                x = h[i] * a[j] + b[j]
                if x < low:
                    low = x
            low ^= s[j]
            _put(row, j, PyLong_FromUnsignedLongLong((low & keep) | tag))
        out.append(row)
    return out



# -- the ballot's tally -----------------------------------------------------------------------

def tally(list blocks, set template_keys):
    """detectors/base.py `tally_python`: each block's chars, and the part of them in
    segments whose key is among `template_keys`."""
    cdef list chars_of = [], tchars_of = []
    cdef Py_ssize_t chars, tchars, length
    for block in blocks:
        chars = tchars = 0
        for seg in <list>(<tuple>block)[1]:
            length = <Py_ssize_t>(<tuple>seg)[2]
            chars += length
            if (<tuple>seg)[0] in template_keys:
                tchars += length
        chars_of.append(chars)
        tchars_of.append(tchars)
    return chars_of, tchars_of



# -- the verdicts -------------------------------------------------------------------------------

def kept_text(list blocks, list texts, list runs, list template, list kept):
    """The kept blocks' text in document order, a paragraph a line (engine/pipeline.py
    `kept_text_python`, the reference): `kept` (the kept blocks' texts) on lines of their own
    where each block's text is one line and the lines are in block order; else each run of a
    kept block's segments that `runs` (the walk's) names, a line of its own, in that order."""
    cdef Py_ssize_t n = len(blocks), r = len(runs), j, b, m, c, k
    cdef bint ordered = r == 2 * n or r == 0  # (no runs: a page not walked here, in block order)
    cdef Py_ssize_t *cursor
    cdef list segs, out
    if ordered and r:
        for j in range(n):
            if <Py_ssize_t>runs[2 * j] != j:
                ordered = False
                break
    if ordered:
        return "\n".join(kept)
    if len(texts) != n or len(template) != n or r % 2:
        raise ValueError("kept_text: the lists do not fit")
    cursor = <Py_ssize_t *>calloc(n + 1, sizeof(Py_ssize_t))
    if cursor == NULL:
        raise MemoryError()
    out = []
    try:
        for j in range(0, r, 2):
            b = runs[j]
            m = runs[j + 1]
            if b < 0 or b >= n or m <= 0:
                raise ValueError("kept_text: a run names no block")
            c = cursor[b]
            cursor[b] = c + m
            if template[b]:
                continue
            segs = <list>(<tuple>blocks[b])[1]
            if c + m > len(segs):
                raise ValueError("kept_text: a run goes past its block's segments")
            if m == len(segs):
                out.append(texts[b])
            else:
                out.append(" ".join([(<tuple>segs[k])[1] for k in range(c, c + m)]))
    finally:
        free(cursor)
    return "\n".join(out)


def block_verdicts(list blocks, list texts, list chars, list tchars, list template, list method, list role,
                   verdict_type, str template_label, str content_label):
    """engine/pipeline.py `block_verdicts_python`: a BlockVerdict(path, text, chars, template
    chars, ratio, verdict, method, role) a block, the texts of those kept, and the hrefs of
    the kept blocks and of the others, each in block order."""
    cdef Py_ssize_t n = len(blocks), i
    cdef list verdicts = [], kept = [], kept_links = [], template_links = []
    cdef tuple block
    if len(texts) != n or len(chars) != n or len(tchars) != n or len(template) != n or len(method) != n \
            or len(role) != n:
        raise ValueError("block_verdicts: the lists differ in length")
    for i in range(n):
        text = texts[i]
        c = chars[i]
        t = tchars[i]
        block = <tuple>blocks[i]
        links = block[3]
        if template[i]:
            verdict = template_label
            if links:
                template_links.extend(links)
        else:
            verdict = content_label
            kept.append(text)
            if links:
                kept_links.extend(links)
        v = PyType_GenericAlloc(verdict_type, 8)
        _put(v, 0, block[0])
        _put(v, 1, text)
        _put(v, 2, c)
        _put(v, 3, t)
        # int / int: the quotient of the two as doubles, as Python's true division of ints
        # below 2^53 is (a block's characters are far fewer).
        _put(v, 4, <double>(<Py_ssize_t>t) / <double>(<Py_ssize_t>c) if t else 0.0)
        _put(v, 5, verdict)
        _put(v, 6, method[i])
        _put(v, 7, role[i])
        verdicts.append(v)
    return verdicts, kept, kept_links, template_links


# -- the layout detector's content region -------------------------------------------------------

def content_region(list node_of_block, list novel, list chars, list achars, list end, double share):
    """detectors/layout.py `content_region_python`: the deepest node whose subtree holds at
    least `share` of the page's new plain text (the same doubles, summed in the same order)."""
    cdef Py_ssize_t n = len(end), nb = len(node_of_block), i, node, new, c, found = 0
    cdef double whole, floor
    cdef double *acc
    if len(novel) != nb or len(chars) < n or len(achars) < n:
        raise ValueError("content_region: the lists differ in length")
    if n == 0:
        return 0
    acc = <double *>calloc(n + 1, sizeof(double))
    if acc == NULL:
        raise MemoryError()
    try:
        # acc[i + 1] - acc[i]: node i's new characters times the share of its text outside links
        for i in range(nb):
            new = novel[i]
            if new:
                node = node_of_block[i]
                c = chars[node]
                if c:
                    acc[node + 1] = <double>new * (1.0 - <double>(<Py_ssize_t>achars[node]) / <double>c)
        for i in range(n):  # prefix sums in document order: a subtree is a contiguous range
            acc[i + 1] = acc[i] + acc[i + 1]
        whole = acc[<Py_ssize_t>end[0]] - acc[0]
        if whole <= 0.0:
            return 0
        floor = share * whole
        for node in range(n - 1, -1, -1):
            if acc[<Py_ssize_t>end[node]] - acc[node] >= floor:
                found = node
                break
        return found
    finally:
        free(acc)


# -- a page's segment keys ---------------------------------------------------------------------

def segment_keys(list blocks):
    """engine/pipeline.py `segment_keys_python`: the page's distinct segment keys, sorted and as a set."""
    return _distinct_keys([(<tuple>block)[1] for block in blocks])


# -- a warm page's layout keys ------------------------------------------------------------------

cdef inline unsigned long long _tagged(unsigned long long x, unsigned long long keep, unsigned long long tag) noexcept nogil:
    """detectors/layout.py `tagged_key` of x (the value XORed with its salt already)."""
    return (_mix(x) & keep) | tag


def layout_keys(list paths, list novel, list parent, list container, list end, Py_ssize_t region,
                unsigned long long new_text_salt, unsigned long long container_salt, unsigned long long pages_key,
                unsigned long long keep, unsigned long long tag):
    """detectors/layout.py `layout_keys_python`: a warm page's layout keys (sorted), each
    distinct path's seen and new-text keys, the region's chain and its container keys."""
    cdef Py_ssize_t n = len(paths), i, node, child, nth, count = 0
    cdef unsigned long long key, value
    if len(novel) != n:
        raise ValueError("layout_keys: a path and a count of new characters for each block")
    if not (len(parent) == len(container) == len(end)) or not 0 <= region < len(parent):
        raise ValueError("layout_keys: the node lists differ in length, or the region is no node")
    cdef dict seen = {}
    cdef dict fresh = {}
    cdef list chain = [region]
    cdef list enclosing = []
    cdef list keys = []
    node = region
    while <Py_ssize_t>parent[node] >= 0:
        node = <Py_ssize_t>parent[node]
        chain.append(node)
    # Every key the page adds: a distinct path's seen key, a path's new-text key (where a
    # block at it has new text), the chain's container keys and the pages' key.
    cdef unsigned long long *out = <unsigned long long *>malloc((2 * n + len(chain) + 1) * sizeof(unsigned long long))
    if out == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            path = paths[i]
            mine = seen.get(path)
            if mine is None:
                key = _key64(path)
                out[count] = _tagged(key, keep, tag)
                seen[path] = PyLong_FromUnsignedLongLong(out[count])
                count += 1
                value = _tagged(key ^ new_text_salt, keep, tag)
                fresh[path] = PyLong_FromUnsignedLongLong(value)
            else:
                value = _key64(fresh[path])
            if <Py_ssize_t>novel[i] != 0:
                out[count] = value
                count += 1
        for node in chain:  # _container_key(_nth_container(...))
            key = _key64(container[node])
            nth = 0
            if <Py_ssize_t>parent[node] >= 0:
                child = <Py_ssize_t>parent[node] + 1
                while child < node:
                    if _key64(container[child]) == key:
                        nth += 1
                    child = <Py_ssize_t>end[child]
            if nth:
                key ^= <unsigned long long>nth * 0x9E3779B97F4A7C15ULL
            value = _tagged(key ^ container_salt, keep, tag)
            enclosing.append(PyLong_FromUnsignedLongLong(value))
            out[count] = value
            count += 1
        out[count] = pages_key
        count += 1
        _sort(out, count)
        for i in range(count):
            if i and out[i] == out[i - 1]:
                continue
            keys.append(PyLong_FromUnsignedLongLong(out[i]))
    finally:
        free(out)
    return keys, seen, fresh, chain, enclosing


def layout_shares(list keys, list dfs, list paths, dict seen, dict fresh, list enclosing, pages_key, table_df):
    """detectors/layout.py `layout_shares_python`: the region chain's shares, each block's
    path's novelty and presence, and the pages counted, from the DFs of the page's `keys`
    (ascending) and `table_df` for the new-text keys the page did not add."""
    cdef Py_ssize_t n = len(keys), i, at
    cdef long long pages, new_df, seen_df
    if len(dfs) != n:
        raise ValueError("layout_shares: a DF for each key")
    cdef unsigned long long *values = <unsigned long long *>malloc((n + 1) * sizeof(unsigned long long))
    if values == NULL:
        raise MemoryError()
    cdef list shares = []
    cdef dict novelty = {}
    cdef dict presence = {}
    try:
        for i in range(n):
            values[i] = _key64(keys[i])
        at = _index_in_sorted(values, n, _key64(pages_key))
        if at < 0:
            raise KeyError(pages_key)
        pages = <long long>dfs[at]
        for key in enclosing:
            at = _index_in_sorted(values, n, _key64(key))
            if at < 0:
                raise KeyError(key)
            shares.append(<double><long long>dfs[at] / <double>pages)
        for path, key in seen.items():
            fresh_key = fresh[path]
            at = _index_in_sorted(values, n, _key64(fresh_key))
            new_df = <long long>dfs[at] if at >= 0 else <long long>table_df(fresh_key)
            at = _index_in_sorted(values, n, _key64(key))
            if at < 0:
                raise KeyError(key)
            seen_df = <long long>dfs[at]
            novelty[path] = <double>new_df / <double>seen_df
            presence[path] = <double>seen_df / <double>pages
    finally:
        free(values)
    return shares, [novelty[path] for path in paths], [presence[path] for path in paths], pages


# -- the sections beside the main text ---------------------------------------------------------

def aside_blocks(list flags, list nodes, list tag, list parent, list end, list chars, Py_ssize_t main,
                 long aside_bits, long section_bits, long in_section_bits, long f_comments, long f_related,
                 role_comments, role_related, role_other, tuple beside):
    """engine/decision.py `aside_blocks_python` (with `_beside_blocks`): the blocks in a
    section beside the main text (node `main`), with the section's role."""
    cdef dict out = {}
    cdef Py_ssize_t nb = len(nodes), n = len(tag), i, at, element, lo, hi, k
    cdef long bits
    cdef long long total = -1, inside
    if not (len(flags) == len(parent) == len(end) == len(chars) == n):
        raise ValueError("aside_blocks: the node lists differ in length")
    for pair in beside:  # _beside_blocks: the elements HTML puts beside the content, outermost first
        name = <str>(<tuple>pair)[0]
        role = (<tuple>pair)[1]
        at = 0
        while True:
            element = -1
            for k in range(at, n):
                if _same(<str>tag[k], name):
                    element = k
                    break
            if element < 0:
                break
            at = <Py_ssize_t>end[element]  # one inside this one is this one's
            if element <= main < at:
                at = element + 1  # it holds the main text: the ones inside it may not
                continue
            lo = bisect_left(nodes, element, 0, nb)
            hi = bisect_left(nodes, at, 0, nb)
            if lo == hi:
                continue
            if total < 0:
                total = 0
                for k in range(n):
                    total += <long long>chars[k]
            inside = 0
            for k in range(element, at):
                inside += <long long>chars[k]
            if 2 * inside <= total:
                for i in range(lo, hi):
                    if i not in out:
                        out[i] = role
    for i in range(nb):  # a section named by an element's classes, nearest first
        at = <Py_ssize_t>nodes[i]
        if not (<long>flags[at] & aside_bits):
            continue
        while at > 0:
            bits = <long>flags[at]
            if bits & section_bits and not (at <= main < <Py_ssize_t>end[at]):
                out[i] = role_comments if bits & f_comments else role_related if bits & f_related else role_other
                break
            if not bits & in_section_bits:
                break
            at = <Py_ssize_t>parent[at]
    return out


# -- the clusters' page features ---------------------------------------------------------------

def path_keys(blocks, hash64):
    """detectors/clusters.py `path_key` of each block's DOM path, as a set: XXH3-64 of the
    path's UTF-8 (by `hash64`, xxhash's function, where XXH3_64bits was not found)."""
    cdef set out = set()
    cdef const char *s
    cdef Py_ssize_t n
    for block in blocks:
        s = PyUnicode_AsUTF8AndSize((<tuple>block)[0], &n)
        if _xxh3 != NULL:
            out.add(PyLong_FromUnsignedLongLong(_xxh3(s, n)))
        else:
            out.add(hash64(PyBytes_FromStringAndSize(s, n)))
    return out


# -- a page's links ---------------------------------------------------------------------------

cdef object _SLOW = object()  # an href the fast forms do not cover: resolved by the caller's function


cdef inline bint _starts_http(int kind, const void *data, Py_ssize_t n) noexcept:
    """Whether the text starts with "http://" or "https://" (lower case, as links.py checks)."""
    cdef Py_ssize_t i, at = 4
    cdef const char *head = b"https://"
    if n < 7:
        return False
    for i in range(4):
        if PyUnicode_READ(kind, <void *>data, i) != <Py_UCS4>head[i]:
            return False
    if PyUnicode_READ(kind, <void *>data, 4) == 115:  # "s"
        at = 5
    if n < at + 3:
        return False
    return PyUnicode_READ(kind, <void *>data, at) == 58 and PyUnicode_READ(kind, <void *>data, at + 1) == 47 \
        and PyUnicode_READ(kind, <void *>data, at + 2) == 47  # "://"


cdef str _remove_dots(str path):
    """links.py `_remove_dots`, the same steps: RFC 3986 remove_dot_segments on an absolute path."""
    cdef list segs = path.split("/"), out = []
    for seg in segs:
        if _same(<str>seg, ".."):
            if len(out) > 1:
                out.pop()
        elif not _same(<str>seg, "."):
            out.append(seg)
    last = <str>segs[len(segs) - 1]  # (no negative indexes in this module: wraparound is off)
    if _same(last, ".") or _same(last, ".."):
        out.append("")
    return "/".join(out)


cdef str _dotless(str path):
    """An absolute path with a dot segment before its query: those segments removed, as
    links.py `_resolve_href` does (the query kept as it is)."""
    cdef Py_ssize_t q = path.find("?")
    if q < 0:
        return _remove_dots(path)
    return _remove_dots(PyUnicode_Substring(path, 0, q)) + PyUnicode_Substring(path, q, PyUnicode_GET_LENGTH(path))


cdef inline Py_ssize_t _href_marks(const ucs_t *s, Py_ssize_t n, Py_ssize_t *cut, Py_ssize_t *query,
                                   Py_ssize_t *colon, Py_ssize_t *stop, bint *dotted) noexcept nogil:
    """`_fast_href`'s one pass over an href, in the str's own width: where the fragment cuts
    it (`cut`, n without one), its first "?" (`query`), ":" (`colon`), "/" or "?" (`stop`),
    and whether a "/." comes before the query (`dotted`, or it was set already); -1 for a
    tab or line break before the fragment (control characters after it change nothing
    before it). A character that is none of "#?/:." and no control character is passed
    over with one comparison."""
    cdef Py_ssize_t i
    cdef uint32_t c, prev = 0
    for i in range(n):
        c = s[i]
        if c > 63:  # none of the characters looked for
            prev = c
            continue
        if c == 35:  # "#"
            cut[0] = i
            return 0
        if c == 9 or c == 10 or c == 13:
            return -1
        if c == 63:  # "?"
            if query[0] < 0:
                query[0] = i
                if stop[0] < 0:
                    stop[0] = i
        elif c == 47:  # "/"
            if stop[0] < 0:
                stop[0] = i
        elif c == 58:  # ":"
            if colon[0] < 0:
                colon[0] = i
        elif c == 46 and prev == 47 and query[0] < 0:  # "/." before the query
            dotted[0] = True
        prev = c
    return 0


cdef object _fast_href(str href, str origin, str where):
    """One href's URL as links.py `_resolve_href` gives it, for the common forms: absolute
    http(s), root-relative and (`where` not None: the base directory has no dot segment)
    path-relative, dot segments removed; None for an in-page link; _SLOW for any other."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(href), at, cut, end, query = -1, colon = -1, stop = -1
    cdef int kind
    cdef const void *data
    cdef Py_UCS4 first
    cdef bint dotted
    if n == 0:
        return None
    kind = PyUnicode_KIND(href)
    data = PyUnicode_DATA(href)
    first = PyUnicode_READ(kind, <void *>data, 0)
    if first == 35:  # "#": an in-page link
        return None
    if Py_UNICODE_ISSPACE(first) or Py_UNICODE_ISSPACE(PyUnicode_READ(kind, <void *>data, n - 1)):
        return _SLOW  # stripped first
    dotted = first == 46  # "."
    cut = n
    if kind == PyUnicode_1BYTE_KIND:
        at = _href_marks(<const Py_UCS1 *>data, n, &cut, &query, &colon, &stop, &dotted)
    elif kind == PyUnicode_2BYTE_KIND:
        at = _href_marks(<const Py_UCS2 *>data, n, &cut, &query, &colon, &stop, &dotted)
    else:
        at = _href_marks(<const uint32_t *>data, n, &cut, &query, &colon, &stop, &dotted)
    if at < 0:
        return _SLOW  # a tab or line break: removed first, as browsers do
    # urljoin drops an empty query: a "?" that is the href's first and last character (before "#").
    end = cut - 1 if query == cut - 1 else cut
    if _starts_http(kind, data, cut):
        return href if end == n else PyUnicode_Substring(href, 0, end)
    if colon >= 0 and (stop < 0 or stop > colon):
        return _SLOW  # a scheme of its own
    if first == 47:  # "/"
        if cut > 1 and PyUnicode_READ(kind, <void *>data, 1) == 47:
            return _SLOW  # "//": the base's scheme
        if dotted:
            return origin + _dotless(href if end == n else PyUnicode_Substring(href, 0, end))
        return origin + (href if end == n else PyUnicode_Substring(href, 0, end))
    if first == 63 or where is None:  # "?": the base's path
        return _SLOW
    if dotted:  # the base directory (where's path: it has no dot segment) and the href, dots removed
        return origin + _dotless(PyUnicode_Substring(where, PyUnicode_GET_LENGTH(origin), PyUnicode_GET_LENGTH(where))
                                 + (href if end == n else PyUnicode_Substring(href, 0, end)))
    return where + (href if end == n else PyUnicode_Substring(href, 0, end))


def absolute_links(hrefs, str origin, str where, resolve):
    """engine/links.py `absolute_links_python` for one base: each distinct href's URL, the
    URLs distinct, in first-seen order. The common forms are resolved here (`_fast_href`),
    the others by `resolve(href)` (URL or None)."""
    cdef set seen = set()
    cdef list out = []
    cdef Py_ssize_t size = 0
    for href in dict.fromkeys(hrefs):
        url = _fast_href(<str>href, origin, where) if type(href) is str else _SLOW
        if url is _SLOW:
            url = resolve(href)
        if url is not None:
            seen.add(url)  # one lookup: a URL seen before leaves the set's size as it was
            if len(seen) != size:
                size += 1
                out.append(url)
    return out



# -- the decision -------------------------------------------------------------------------------

cdef enum:  # what block_decisions knows of a block
    _INSIDE = 1  # inside the content region
    _LINKS = 2  # a link list: at least half of its node's text in links
    _PROSE = 4  # new prose: not a link list, at least half of its characters new to the host


cdef double _level(_Scored *items, Py_ssize_t k, double quantile) noexcept nogil:
    """engine/decision.py `text_level`: the score at which the items' chars, by rising
    score, reach `quantile` of their sum (0.0 without chars). Sorts `items`."""
    cdef Py_ssize_t i, total = 0, reached = 0
    cdef double at
    for i in range(k):
        total += items[i].chars
    if k == 0 or total <= 0:
        return 0.0
    _sort(items, k)
    at = quantile * <double>total
    for i in range(k):
        reached += items[i].chars
        if <double>reached >= at:
            return items[i].score
    return items[k - 1].score


def text_level(scores, list chars, double quantile):
    """engine/decision.py `text_level`, compiled (`text_level_python` is the reference):
    `scores` a float64 array or a list."""
    cdef Py_ssize_t n = len(chars), i
    cdef _Scored *items
    cdef double level
    if len(scores) != n:
        raise ValueError("text_level: the lists differ in length")
    if n == 0:
        return 0.0
    items = <_Scored *>malloc(n * sizeof(_Scored))
    if items == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            items[i].score = scores[i]
            items[i].chars = chars[i]
        level = _level(items, n, quantile)
    finally:
        free(items)
    return level


def block_roles(list template, list method, dict aside, list node_of_block, list node_chars, list node_achars,
                list novel, list chars, str main, str template_role, str related, str other, str by_markup,
                str by_pagelevel):
    """engine/decision.py `block_roles_python`: each block's role. `node_of_block`,
    `node_chars`, `node_achars` and `novel` are None where the page-specific text is not
    told apart (a cold page, no block tree or no new-text counts)."""
    cdef Py_ssize_t n = len(template), i, node
    cdef list roles = [main] * n
    cdef bint own = node_of_block is not None and novel is not None
    if len(method) != n or (own and (len(node_of_block) != n or len(novel) != n or len(chars) != n)):
        raise ValueError("block_roles: the lists differ in length")
    for i in range(n):
        if not template[i]:
            continue
        role = template_role
        by = method[i]
        found = aside.get(i) if aside else None
        if found is not None and (by == by_markup or by == by_pagelevel):
            role = found
        elif own and by == by_pagelevel and 2 * <Py_ssize_t>novel[i] >= <Py_ssize_t>chars[i]:
            node = node_of_block[i]
            role = related if 2 * <Py_ssize_t>node_achars[node] >= <Py_ssize_t>node_chars[node] else other
        roles[i] = role
    return roles


def block_decisions(list chars, list tchars, bytearray outright, list nodes, list node_chars, list node_achars,
                    list novel, Py_ssize_t first, Py_ssize_t end, list novelty, list presence, list scores,
                    double max_ratio, double layout_novelty, double layout_presence, double inner, double outer,
                    double max_removed_share, double inner_ratio, double outer_ratio, double region_quantile,
                    str by_table, str by_pagelet, str by_pagelevel):
    """engine/decision.py `block_decisions_python`: a warm host's page, each block's verdict
    and method (the same comparisons of the same doubles)."""
    cdef Py_ssize_t n = len(chars), i, node, c, t, region_chars = 0, region_removed = 0, k = 0, kept_n = 0
    cdef list template = [False] * n, method = [by_table] * n
    cdef bint has_region = nodes is not None, layout = novelty is not None and presence is not None
    cdef bint has_scores = scores is not None, has_novel = has_region and novel is not None
    cdef bint leveled = has_scores and (inner_ratio > 0.0 or outer_ratio > 0.0), wanted = False, on_layout
    cdef const unsigned char *out = NULL
    cdef unsigned char *kind  # per block: _INSIDE, _LINKS, _PROSE bits
    cdef Py_ssize_t *model_inside
    cdef _Scored *kept
    cdef double *sc
    cdef double s, level, keep_below = 0.0
    if len(tchars) != n or (has_region and (len(nodes) != n or len(node_achars) != len(node_chars))) \
            or (has_novel and len(novel) != n) or (layout and (len(novelty) != n or len(presence) != n)) \
            or (has_scores and len(scores) != n):
        raise ValueError("block_decisions: the lists differ in length")
    if outright is not None:
        if len(outright) != n:
            raise ValueError("block_decisions: the lists differ in length")
        out = <const unsigned char *><char *>outright
    kind = <unsigned char *>calloc(n + 1, 1)
    model_inside = <Py_ssize_t *>malloc((n + 1) * sizeof(Py_ssize_t))
    kept = <_Scored *>malloc((n + 1) * sizeof(_Scored))
    sc = <double *>malloc((n + 1) * sizeof(double))
    if kind == NULL or model_inside == NULL or kept == NULL or sc == NULL:
        free(kind)
        free(model_inside)
        free(kept)
        free(sc)
        raise MemoryError()
    try:
        if has_region:
            for i in range(n):
                node = nodes[i]
                if node < 0 or node >= len(node_chars):  # the lists are read unchecked below
                    raise ValueError("block_decisions: a block's node is not in the node lists")
                if 2 * <Py_ssize_t>node_achars[node] >= <Py_ssize_t>node_chars[node]:
                    kind[i] = _LINKS
                elif has_novel and 2 * <Py_ssize_t>novel[i] >= <Py_ssize_t>chars[i]:
                    kind[i] = _PROSE  # new prose: page-specific text, not a link list
                if first <= node < end:
                    kind[i] |= _INSIDE
        if has_scores:
            for i in range(n):
                sc[i] = scores[i]
        for i in range(n):
            t = tchars[i]
            on_layout = layout and <double>novelty[i] < layout_novelty and <double>presence[i] >= layout_presence
            if kind[i] & _INSIDE and layout and not on_layout:
                pass  # repetition inside the content region, off the host's layout: content
            elif t and <double>t > max_ratio * <double>(<Py_ssize_t>chars[i]):
                template[i] = True
                continue
            elif out != NULL and out[i] == 1:
                template[i] = True
                method[i] = by_pagelet
                continue
            elif has_region and not kind[i] & _INSIDE and on_layout:
                template[i] = True  # outside the region, at one of the host's layout paths
                continue
            if not leveled:
                continue
            if kind[i] & _INSIDE:  # kept inside the region: its text level counts it
                kept[kept_n].score = sc[i]
                kept[kept_n].chars = chars[i]
                kept_n += 1
                if inner_ratio > 0.0 and kind[i] & _LINKS and sc[i] > inner:
                    wanted = True  # a link list the level may let go
            elif outer_ratio > 0.0 and kind[i] & _PROSE and sc[i] > outer:
                wanted = True  # new prose outside the region the level may keep
        if has_scores:
            if wanted:  # else the region's text level changes nothing
                level = _level(kept, kept_n, region_quantile)
                if inner_ratio > 0.0 and inner_ratio * level > inner:
                    inner = inner_ratio * level
                keep_below = outer_ratio * level
            for i in range(n):
                if template[i] is True:
                    continue
                s = sc[i]
                if kind[i] & _INSIDE:
                    c = chars[i]
                    region_chars += c
                    if s > inner and kind[i] & _LINKS:
                        model_inside[k] = i
                        k += 1
                        region_removed += c
                elif s > outer and not (kind[i] & _PROSE and s <= keep_below):
                    template[i] = True
                    method[i] = by_pagelevel
            if k and <double>region_removed <= max_removed_share * <double>region_chars:
                for i in range(k):
                    template[model_inside[i]] = True
                    method[model_inside[i]] = by_pagelevel
        return template, method
    finally:
        free(kind)
        free(model_inside)
        free(kept)
        free(sc)


# -- the page's title, language and base URL (page/meta.py, engine/links.py) -----------------
# What selectolax's node objects and CSS queries answer there, read in C: the Python
# functions run them where this module is not in use, and page/meta.py compares both on
# probe pages before it uses these (`meta_kernel`).

cdef bint _named(void *node, const char *name, size_t n) noexcept nogil:
    """Whether `node` is an element whose qualified name is `name` (`n` bytes)."""
    cdef size_t length = 0
    cdef const unsigned char *s
    if _type(node) != ELEMENT:
        return False
    s = _element_name(node, &length)
    return s != NULL and length == n and memcmp(s, name, n) == 0


# The tag ids of <title>, <meta> and <base>, once an element of that name was seen (0
# before): lexbor's ids of the names it knows are static, the same in every document, and
# comparing one costs a call where reading the name costs a lookup.
cdef uintptr_t _title_id = 0, _meta_id = 0, _base_id = 0


cdef inline bint _is_tag(void *node, const char *name, size_t n, uintptr_t *known) noexcept nogil:
    """`_named(node, name, n)`, by the tag id once one such element was seen."""
    cdef uintptr_t tid = _tag_id(node)
    if known[0]:
        return tid == known[0] and _type(node) == ELEMENT
    if tid == TEXT_ID or not _named(node, name, n):
        return False
    if tid < N_CACHED:
        known[0] = tid
    return True


cdef void *_following(void *node, void *root) noexcept nogil:
    """The node after `node` in document order, within `root`'s subtree (NULL past its end)."""
    cdef void *sibling = _first_child(node)
    if sibling != NULL:
        return sibling
    while node != root and node != NULL:
        sibling = _next(node)
        if sibling != NULL:
            return sibling
        node = _parent(node)
    return NULL


cdef void *_first_named(void *root, const char *name, size_t n, uintptr_t *known) noexcept nogil:
    """The first element named `name` in `root`'s subtree (root included), in document order."""
    cdef void *node = root
    while node != NULL:
        if _is_tag(node, name, n, known):
            return node
        node = _following(node, root)
    return NULL


cdef str _deep_text(void *element):
    """The element's text nodes' text, in document order (selectolax's `text(deep=True)`)."""
    cdef void *node = _following(element, element)
    cdef lexbor_str *s
    cdef unsigned char *buf = NULL
    cdef Py_ssize_t cap = 0, n = 0
    cdef const unsigned char *only = NULL
    cdef Py_ssize_t only_len = 0, pieces = 0
    try:
        while node != NULL:
            if _tag_id(node) == TEXT_ID:
                s = <lexbor_str *>(<char *>node + _text_offset)
                if s.data != NULL:
                    pieces += 1
                    if pieces == 1:
                        only, only_len = s.data, <Py_ssize_t>s.length
                    else:
                        if pieces == 2:
                            _grow(&buf, &cap, only_len + 1)
                            memcpy(buf, only, only_len)
                            n = only_len
                        _grow(&buf, &cap, n + <Py_ssize_t>s.length + 1)
                        memcpy(buf + n, s.data, s.length)
                        n += s.length
            node = _following(node, element)
        if pieces == 1:  # the common case: a title's one text node, decoded where it lies
            return PyUnicode_DecodeUTF8(<const char *>only, only_len, "replace")
        return PyUnicode_DecodeUTF8(<const char *>buf, n, "replace") if n else ""
    finally:
        free(buf)


def title_text(Py_ssize_t head, Py_ssize_t root):
    """The text of the page's first <title>: the first in the head (the element at address
    `head`, 0 for none), else the first under the root element at `root` (0: none), as
    page/meta.py's `_title_node` finds it; None when there is none."""
    cdef void *node = NULL
    if head:
        node = _first_named(<void *>head, b"title", 5, &_title_id)
    if node == NULL and root:
        node = _first_named(<void *>root, b"title", 5, &_title_id)
    if node == NULL:
        return None
    return _deep_text(node)


def root_langs(Py_ssize_t root):
    """The root element's `lang` and `xml:lang` values, each None when absent or empty."""
    return _attr_str(<void *>root, b"lang", 4), _attr_str(<void *>root, b"xml:lang", 8)


def http_equiv_metas(Py_ssize_t root):
    """(http-equiv, content) of each <meta> under the root element at `root` that has an
    http-equiv value, in document order (the content None where it has none)."""
    cdef list out = []
    cdef void *node = <void *>root
    cdef object equiv
    while node != NULL:
        if _is_tag(node, b"meta", 4, &_meta_id):
            equiv = _attr_str(node, b"http-equiv", 10)
            if equiv is not None:
                out.append((equiv, _attr_str(node, b"content", 7)))
        node = _following(node, <void *>root)
    return out


def base_hrefs(Py_ssize_t head, Py_ssize_t body):
    """The href values (None where absent or empty) of the <base> children of the head
    (the element at address `head`, 0 for none) and then of the body (`body`), in order."""
    cdef list out = []
    cdef void *node
    cdef Py_ssize_t parent
    for parent in (head, body):
        if not parent:
            continue
        node = _first_child(<void *>parent)
        while node != NULL:
            if _is_tag(node, b"base", 4, &_base_id):
                out.append(_attr_str(node, b"href", 4))
            node = _next(node)
    return out


# -- a layout element's class and id hints (page/cues.py `hints`) -----------------------------

cdef class Hints:
    """`cues.hints` compiled: the hint bits of a (class, id) pair, from marks and words that
    page/cues.py gives (HINT_MARKS), in one pass over each of the two lower-cased; and, by
    other marks (VOLATILE_MARKS), `cues.layout_classes` (`layout_form`).

    A mark is a substring (ASCII, from a letter or a digit on) of the class, or of the class
    or the id; a word is one whole run of letters and digits (kind 0) or of letters (kind 1).
    The Walker calls them where the pair or the class is in no cache; page/compiled.py uses
    them only where they gave the Python functions' results on probes.
    """
    cdef bytes data  # every mark and word, one after the other
    cdef Py_ssize_t count  # marks and words
    cdef Py_ssize_t *start
    cdef Py_ssize_t *length
    cdef int *bit
    cdef unsigned char *kind  # 255: a mark; 0, 1: a word of that kind
    cdef unsigned char *class_only
    # Sorted by (first character's bucket, kind: words of kind 0, of kind 1, then marks), so that
    # a bucket's marks and each kind's words are ranges: [lo[b][g], lo[b][g + 1]) for group g
    # (0, 1: words of that kind; 2: marks) of bucket b (a letter a + b, a digit 0 + b - 26).
    cdef Py_ssize_t lo[37][4]

    def __cinit__(self):
        self.start = self.length = NULL
        self.bit = NULL
        self.kind = self.class_only = NULL

    def __dealloc__(self):
        free(self.start)
        free(self.length)
        free(self.bit)
        free(self.kind)
        free(self.class_only)

    def __init__(self, list entries):
        """`entries`: (text, bit, kind, class_only) each, text of lower-case ASCII starting
        with a letter or a digit; kind 255 for a mark, 0 or 1 for a word (of a letter)."""
        entries = sorted(entries, key=lambda e: (_bucket(ord(e[0][0])) if e[0] else -1, _group(e[2]), e))
        cdef Py_ssize_t n = len(entries), k, at = 0
        self.count = n
        self.start = <Py_ssize_t *>malloc((n + 1) * sizeof(Py_ssize_t))
        self.length = <Py_ssize_t *>malloc((n + 1) * sizeof(Py_ssize_t))
        self.bit = <int *>malloc((n + 1) * sizeof(int))
        self.kind = <unsigned char *>malloc(n + 1)
        self.class_only = <unsigned char *>malloc(n + 1)
        if self.start == NULL or self.length == NULL or self.bit == NULL or self.kind == NULL or self.class_only == NULL:
            raise MemoryError()
        parts = []
        for k in range(n):
            text, bit, kind, class_only = entries[k]
            raw = (<str>text).encode("ascii")
            if not raw or _bucket(raw[0]) < 0 or (kind != 255 and _bucket(raw[0]) >= 26):
                raise ValueError(f"a hint mark must start with a lower-case letter or a digit, a word with a letter: {text!r}")
            self.start[k] = at
            self.length[k] = len(raw)
            self.bit[k] = bit
            self.kind[k] = kind
            self.class_only[k] = 1 if class_only else 0
            parts.append(raw)
            at += len(raw)
        self.data = b"".join(parts)
        k = 0
        cdef int bucket, group
        for bucket in range(37):
            for group in range(4):  # group 3: the end of the bucket
                while k < n and (_bucket(self.data[self.start[k]]), _group(self.kind[k])) < (bucket, group):
                    k += 1
                self.lo[bucket][group] = k

    cdef int _scan(self, const unsigned char *s, Py_ssize_t n, bint is_class) noexcept:
        cdef int flags = 0
        cdef Py_ssize_t i, k, end, m
        cdef unsigned char c
        cdef const unsigned char *data = <const unsigned char *>self.data
        cdef int kind
        cdef int b
        for i in range(n):  # marks, wherever they start
            b = _bucket(s[i])
            if b < 0:
                continue
            for k in range(self.lo[b][2], self.lo[b][3]):
                m = self.length[k]
                # (the second character told apart before a call: most marks fail there)
                if i + m <= n and (m == 1 or s[i + 1] == data[self.start[k] + 1]) \
                        and (is_class or not self.class_only[k]) and not (flags & self.bit[k]) \
                        and memcmp(s + i, data + self.start[k], m) == 0:
                    flags |= self.bit[k]
        for kind in range(2):  # words: whole runs of letters and digits (0), of letters (1)
            i = 0
            while i < n:
                c = s[i]
                if not ((97 <= c <= 122) or (kind == 0 and 48 <= c <= 57)):
                    i += 1
                    continue
                end = i + 1
                while end < n and ((97 <= s[end] <= 122) or (kind == 0 and 48 <= s[end] <= 57)):
                    end += 1
                if 97 <= c <= 122:
                    for k in range(self.lo[c - 97][kind], self.lo[c - 97][kind + 1]):  # words start with a letter
                        if (self.length[k] == end - i and (is_class or not self.class_only[k])
                                and memcmp(s + i, data + self.start[k], end - i) == 0):
                            flags |= self.bit[k]
                i = end
        return flags

    def __call__(self, tuple pair):
        cdef bytes cls = (<str>pair[0]).lower().encode("utf-8", "surrogatepass")
        cdef bytes ident = (<str>pair[1]).lower().encode("utf-8", "surrogatepass")
        return (self._scan(<const unsigned char *>cls, len(cls), True)
                | self._scan(<const unsigned char *>ident, len(ident), False))

    def layout_form(self, str cls):
        """`cues.layout_classes` by these marks (a volatile class name holds one): the class
        names that hold none, sorted, each after a dot; empty for none."""
        cdef set kept = set()
        cdef bytes raw
        for name in cls.split():
            raw = (<str>name).encode("utf-8", "surrogatepass")
            if not self._scan(<const unsigned char *>raw, len(raw), True):
                kept.add(name)
        if not kept:
            return ""
        return "." + ".".join(sorted(kept))


cdef inline int _group(int kind) noexcept nogil:
    """A Hints entry's group within its bucket: words of kind 0, of kind 1, then marks."""
    return 2 if kind == 255 else kind


cdef inline int _bucket(unsigned char c) noexcept nogil:
    """A mark's first character's bucket: a-z 0-25, 0-9 26-35, else -1."""
    if 97 <= c <= 122:
        return c - 97
    if 48 <= c <= 57:
        return c - 48 + 26
    return -1


# -- before parsing: how many tags, how deep they nest ------------------------------------

cdef extern from *:
    """
    /* Counting loops the compiler vectorises (-O3 for these only). The count of a chunk is
       kept in the characters' own width (a chunk is at most the largest count that width
       holds), so that the vector lanes need no widening to 64 bits in the loop: for the
       2-byte strings most pages are, 1.7 -> 3.5 G characters a second. */
    #include <stdint.h>
    #define DT_COUNT(name, type, chunk) \
    __attribute__((optimize("O3"))) static Py_ssize_t name(const type *s, Py_ssize_t n, type c) { \
        Py_ssize_t count = 0, i = 0; \
        for (; n - i >= (chunk); i += (chunk)) { \
            type in_chunk = 0; \
            for (Py_ssize_t j = 0; j < (chunk); j++) in_chunk += s[i + j] == c; \
            count += in_chunk; \
        } \
        for (; i < n; i++) count += s[i] == c; \
        return count; \
    }
    DT_COUNT(dt_count_u8, uint8_t, 255)
    DT_COUNT(dt_count_u16, uint16_t, 65535)
    DT_COUNT(dt_count_u32, uint32_t, 0x7fffffff)
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* The next c at or after i (n where there is none): memchr for bytes, 8 characters a
       step for the 2-byte strings most pages are (SSE2, where there is). */
    static Py_ssize_t dt_find(int kind, const void *data, Py_ssize_t i, Py_ssize_t n, Py_UCS4 c) {
        if (kind == 1) {
            const uint8_t *s = (const uint8_t *)data;
            const void *at = i < n ? memchr(s + i, (int)c, (size_t)(n - i)) : NULL;
            return at ? (const uint8_t *)at - s : n;
        }
        if (kind == 2) {
            const uint16_t *s = (const uint16_t *)data;
    #if defined(__SSE2__)
            const __m128i want = _mm_set1_epi16((short)c);
            for (; n - i >= 8; i += 8) {
                int hits = _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(s + i)), want));
                if (hits)
                    return i + (__builtin_ctz((unsigned)hits) >> 1);
            }
    #endif
            while (i < n && s[i] != c) i++;
            return i;
        }
        const uint32_t *s = (const uint32_t *)data;
        while (i < n && s[i] != c) i++;
        return i;
    }
    """
    Py_ssize_t dt_count_u8(const unsigned char *s, Py_ssize_t n, unsigned char c) noexcept nogil
    Py_ssize_t dt_count_u16(const unsigned short *s, Py_ssize_t n, unsigned short c) noexcept nogil
    Py_ssize_t dt_count_u32(const unsigned int *s, Py_ssize_t n, unsigned int c) noexcept nogil
    Py_ssize_t dt_find(int kind, const void *data, Py_ssize_t i, Py_ssize_t n, Py_UCS4 c) noexcept nogil


def count_tags(str html):
    """html.count("<"), at memory speed (str.count compares one character at a time)."""
    cdef int kind = PyUnicode_KIND(html)
    cdef void *data = PyUnicode_DATA(html)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(html)
    if kind == 1:
        return dt_count_u8(<const unsigned char *>data, n, 60)
    if kind == 2:
        return dt_count_u16(<const unsigned short *>data, n, 60)
    return dt_count_u32(<const unsigned int *>data, n, 60)


cdef inline bint _ascii_alpha(Py_UCS4 c) noexcept nogil:
    return (65 <= c <= 90) or (97 <= c <= 122)


cdef inline bint _ascii_alnum(Py_UCS4 c) noexcept nogil:
    return _ascii_alpha(c) or (48 <= c <= 57)


cdef dict _NOT_NESTING_PACKED = {}  # not_nesting -> its short names packed (_pack), sorted


def nesting_estimate(str html, frozenset not_nesting):
    """page/guards.py nesting_estimate: the deepest nesting the tags open (same result)."""
    cdef int kind = PyUnicode_KIND(html)
    cdef void *data = PyUnicode_DATA(html)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(html), i = 0, j, depth = 0, deepest = 0, m, k
    cdef Py_UCS4 c
    cdef bint close
    cdef unsigned long long word
    cdef unsigned long long packed[64]
    cdef Py_ssize_t n_packed = 0
    cdef unsigned char lower
    values = _NOT_NESTING_PACKED.get(not_nesting)
    if values is None:
        values = sorted(_pack(name.encode()) for name in not_nesting if name.isascii() and 0 < len(name) <= 8)
        if len(values) > 64:
            raise ValueError("too many names")
        if len(_NOT_NESTING_PACKED) < 16:
            _NOT_NESTING_PACKED[not_nesting] = values
    for value in values:
        packed[n_packed] = value
        n_packed += 1
    while i < n:
        i = dt_find(kind, data, i, n, 60)  # the next "<"
        if i >= n:
            break
        j = i + 1
        close = j < n and PyUnicode_READ(kind, data, j) == 47  # "/"
        if close:
            j += 1
        if j >= n or not _ascii_alpha(PyUnicode_READ(kind, data, j)):
            i += 1
            continue
        m = j
        word = 0
        while m < n:
            c = PyUnicode_READ(kind, data, m)
            if not _ascii_alnum(c):
                break
            if m - j < 8:
                lower = <unsigned char>(<unsigned int>c + 32 if 65 <= <unsigned int>c <= 90 else <unsigned int>c)
                word |= (<unsigned long long>lower) << (8 * (m - j))
            m += 1
        i = m
        if m - j <= 8 and _in_sorted(packed, n_packed, word):
            continue
        if close:
            if depth:
                depth -= 1
        else:
            depth += 1
            if depth > deepest:
                deepest = depth
    return deepest


# -- the segment table's entries, in C ---------------------------------------------------------
# engine/table.py's reference keeps a host's entries in a dict (key -> (df << 32) | last page)
# and its timing wheel in a dict of lists: 105 to 205 bytes an entry in Python objects, and a
# Python step an entry to load or save a table. `Entries` holds the same entries in two C arrays,
# in the dict's order (insertion order; a key deleted and seen again goes to the end), with an
# open-addressing index over them, and the wheel as a heap of (due page, key): about 40 to 70 bytes an
# entry, a table loaded and saved with one copy of its columns. Its `observe` is HostTable.observe_python's steps; the
# order in which a page's due keys are looked at differs from the wheel's lists, which changes
# nothing (each is kept or dropped on its own entry; the counters are sums).

cdef struct _Due:
    uint64_t due
    uint64_t key


cdef inline uint64_t _mix64(uint64_t k) noexcept nogil:
    """A 64-bit finaliser: keys are hashes, but tagged keys share their low bits."""
    k ^= k >> 33
    k *= 0xFF51AFD7ED558CCDULL
    k ^= k >> 33
    k *= 0xC4CEB9FE1A85EC53ULL
    k ^= k >> 33
    return k


cdef class Entries:
    """A host table's entries and timing wheel (engine/table.py), in C: key -> packed
    ((df << 32) | last page), iterated in insertion order as a dict is."""

    cdef uint64_t *keys  # dense, in insertion order
    cdef uint64_t *vals  # each key's packed value; 0 where the entry was deleted (a DF is never 0)
    cdef Py_ssize_t used, count, cap  # dense slots used (deleted ones included), live entries, capacity
    cdef int32_t *index  # open addressing, linear probing: -1 empty, -2 deleted, else a dense slot
    cdef Py_ssize_t mask  # index size - 1 (a power of two, at least 4/3 of `cap`: at most 3/4 full)
    cdef _Due *heap  # the wheel: a binary min-heap on `due`
    cdef Py_ssize_t hn, hcap
    cdef readonly Py_ssize_t examined  # due keys looked at by `observe` so far (the expiry's work)

    def __cinit__(self):
        self._alloc(8)

    def __dealloc__(self):
        free(self.keys)
        free(self.vals)
        free(self.index)
        free(self.heap)

    cdef int _alloc(self, Py_ssize_t cap) except -1:
        cdef Py_ssize_t size = 16
        while 3 * size < 4 * cap:
            size <<= 1
        keys = <uint64_t *>malloc(cap * sizeof(uint64_t))
        vals = <uint64_t *>malloc(cap * sizeof(uint64_t))
        index = <int32_t *>malloc(size * sizeof(int32_t))
        if keys == NULL or vals == NULL or index == NULL:
            free(keys)
            free(vals)
            free(index)
            raise MemoryError()
        memset(index, 0xFF, size * sizeof(int32_t))
        free(self.keys)
        free(self.vals)
        free(self.index)
        self.keys, self.vals, self.index, self.cap, self.mask = keys, vals, index, cap, size - 1
        self.used = self.count = 0
        return 0

    cdef inline Py_ssize_t _find(self, uint64_t key) noexcept nogil:
        """The dense slot of `key`, or -1."""
        cdef Py_ssize_t h = <Py_ssize_t>(_mix64(key) & <uint64_t>self.mask)
        cdef int32_t s
        while True:
            s = self.index[h]
            if s == -1:
                return -1
            if s >= 0 and self.keys[s] == key:
                return s
            h = (h + 1) & self.mask

    cdef int _grow(self) except -1:
        """Room for more entries: the live entries moved up in order (and the index made
        anew), into arrays for half as many again (a compaction every count / 2 new keys at
        the least: O(1) a key)."""
        cdef uint64_t *old_keys = self.keys
        cdef uint64_t *old_vals = self.vals
        cdef Py_ssize_t i, n = self.used
        cdef Py_ssize_t cap = self.count + self.count // 2 + 8
        self.keys = self.vals = NULL
        try:
            self._alloc(cap)
        except MemoryError:
            self.keys, self.vals = old_keys, old_vals
            raise
        for i in range(n):
            if old_vals[i]:
                self._append(old_keys[i], old_vals[i])
        free(old_keys)
        free(old_vals)
        return 0

    cdef inline void _append(self, uint64_t key, uint64_t value) noexcept nogil:
        """A key not held, at the end (room and a free index slot assumed)."""
        cdef Py_ssize_t h = <Py_ssize_t>(_mix64(key) & <uint64_t>self.mask)
        while self.index[h] != -1:
            h = (h + 1) & self.mask
        self.index[h] = <int32_t>self.used
        self.keys[self.used] = key
        self.vals[self.used] = value
        self.used += 1
        self.count += 1

    cdef int _insert(self, uint64_t key, uint64_t value) except -1:
        if self.used == self.cap:
            if self.cap >= 0x3FFFFFFF:
                raise MemoryError("a segment table of 2^30 entries")
            self._grow()
        self._append(key, value)
        return 0

    cdef void _delete(self, Py_ssize_t slot) noexcept nogil:
        cdef Py_ssize_t h = <Py_ssize_t>(_mix64(self.keys[slot]) & <uint64_t>self.mask)
        while self.index[h] != slot:
            h = (h + 1) & self.mask
        self.index[h] = -2
        self.vals[slot] = 0
        self.count -= 1

    cdef int _push(self, uint64_t due, uint64_t key) except -1:
        cdef Py_ssize_t i, up
        cdef _Due *grown
        if self.hn == self.hcap:
            grown = <_Due *>realloc(self.heap, (self.hcap + self.hcap // 2 + 8) * sizeof(_Due))
            if grown == NULL:
                raise MemoryError()
            self.heap = grown
            self.hcap = self.hcap + self.hcap // 2 + 8
        i = self.hn
        self.hn += 1
        while i > 0:
            up = (i - 1) >> 1
            if self.heap[up].due <= due:
                break
            self.heap[i] = self.heap[up]
            i = up
        self.heap[i].due = due
        self.heap[i].key = key
        return 0

    cdef void _pop(self) noexcept nogil:
        """Drop the heap's first item."""
        cdef Py_ssize_t i = 0, child, n
        cdef _Due last
        self.hn -= 1
        n = self.hn
        if n == 0:
            return
        last = self.heap[n]
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and self.heap[child + 1].due < self.heap[child].due:
                child += 1
            if last.due <= self.heap[child].due:
                break
            self.heap[i] = self.heap[child]
            i = child
        self.heap[i] = last

    def __len__(self):
        return self.count

    def __sizeof__(self):
        return object.__sizeof__(self) + self.cap * 16 + (self.mask + 1) * sizeof(int32_t) + self.hcap * sizeof(_Due)

    def __contains__(self, key):
        return self._find(PyLong_AsUnsignedLongLong(key)) >= 0

    def df(self, key, int df_shift):
        """The DF of `key` (0 where it is not held)."""
        cdef Py_ssize_t s = self._find(PyLong_AsUnsignedLongLong(key))
        return 0 if s < 0 else <Py_ssize_t>(self.vals[s] >> df_shift)

    def pop(self, key):
        """Delete `key` (KeyError where it is not held); its packed value. Its wheel item
        stays: expiry skips keys it does not find, as the dict wheel's."""
        cdef Py_ssize_t s = self._find(PyLong_AsUnsignedLongLong(key))
        if s < 0:
            raise KeyError(key)
        value = PyLong_FromUnsignedLongLong(self.vals[s])
        self._delete(s)
        return value

    def items(self):
        """[(key, packed)] in insertion order."""
        cdef list out = []
        cdef Py_ssize_t i
        for i in range(self.used):
            if self.vals[i]:
                out.append((PyLong_FromUnsignedLongLong(self.keys[i]), PyLong_FromUnsignedLongLong(self.vals[i])))
        return out

    def tagged(self, unsigned long long tag_mask, unsigned long long tag):
        """How many keys end in `tag`."""
        cdef Py_ssize_t i, n = 0
        for i in range(self.used):
            if self.vals[i] and (self.keys[i] & tag_mask) == tag:
                n += 1
        return n

    def scheduled(self):
        """The wheel's items (keys looked at again when their page comes; a key deleted
        out of turn may still have one)."""
        return self.hn

    cdef inline Py_ssize_t _see(self, uint64_t k, uint64_t p, int df_shift, Py_ssize_t life1) except -1:
        """One key of page `p`: its DF now, the page its last; a new key scheduled once, at its expiry."""
        cdef Py_ssize_t s = self._find(k), df
        if s < 0:
            self._insert(k, (1ULL << df_shift) | p)
            self._push(p + <uint64_t>life1 + 1, k)
            return 1
        df = <Py_ssize_t>(self.vals[s] >> df_shift) + 1
        self.vals[s] = (<uint64_t>df << df_shift) | p
        return df

    def new_chars(self, list blocks):
        """HostTable.new_chars: each block's characters in segments whose key is not held."""
        cdef list out = PyList_New(len(blocks))
        cdef Py_ssize_t i, n
        for i in range(len(blocks)):
            n = 0
            for seg in <list>(<tuple>blocks[i])[1]:
                if self._find(PyLong_AsUnsignedLongLong((<tuple>seg)[0])) < 0:
                    n += <Py_ssize_t>(<tuple>seg)[2]
            _put_item(out, i, n)
        return out

    def observe(self, list life, Py_ssize_t page, keys, Py_ssize_t threshold, int df_shift,
                unsigned long long tag_mask, unsigned long long tag):
        """HostTable.observe_python's steps on these entries: each key's DF including page
        `page` (the table's page counter after this page), the segment keys that reached
        `threshold` and those at or over it that expired (tagged keys not counted)."""
        cdef list dfs = []
        cdef Py_ssize_t added = 0, removed = 0, nlife = len(life), df, s, i
        cdef uint64_t k, value, last_mask = (1ULL << df_shift) - 1
        cdef uint64_t p = <uint64_t>page, expires
        cdef Py_ssize_t life1 = life[1], last_life = life[nlife - 1]
        cdef array.array packed
        if isinstance(keys, array.array) and (<array.array>keys).ob_descr.typecode == c'Q':
            packed = <array.array>keys  # a replayed page's keys, read as they were stored
            for i in range(len(packed)):
                k = packed.data.as_ulonglongs[i]
                df = self._see(k, p, df_shift, life1)
                if df == threshold and (k & tag_mask) != tag:
                    added += 1
                dfs.append(df)
        else:
            for key in keys:
                k = PyLong_AsUnsignedLongLong(key)
                df = self._see(k, p, df_shift, life1)
                if df == threshold and (k & tag_mask) != tag:
                    added += 1
                dfs.append(df)
        while self.hn and self.heap[0].due < p:  # due on a page that was never this table's
            self._pop()
        while self.hn and self.heap[0].due == p:
            k = self.heap[0].key
            self._pop()
            self.examined += 1
            s = self._find(k)
            if s < 0:
                continue
            value = self.vals[s]
            df = <Py_ssize_t>(value >> df_shift)
            expires = (value & last_mask) + <uint64_t>(<Py_ssize_t>life[df] if df < nlife else last_life) + 1
            if expires <= p:
                self._delete(s)
                if df >= threshold and (k & tag_mask) != tag:
                    removed += 1
            else:
                self._push(expires, k)
        return dfs, added, removed

    def columns(self, int df_shift):
        """The serialised columns (engine/table.py's format): the keys as u64, then the DFs
        as u32, then the last pages as u32, little-endian, in insertion order."""
        cdef Py_ssize_t i, j = 0, n = self.count
        out = PyBytes_FromStringAndSize(NULL, 16 * n)
        cdef char *data = out
        cdef uint64_t *keys = <uint64_t *>data
        cdef uint32_t *dfs = <uint32_t *>(data + 8 * n)
        cdef uint32_t *lasts = <uint32_t *>(data + 12 * n)
        cdef uint64_t value
        for i in range(self.used):
            value = self.vals[i]
            if value:
                keys[j] = self.keys[i]
                dfs[j] = <uint32_t>(value >> df_shift)
                lasts[j] = <uint32_t>value
                j += 1
        return out

    @staticmethod
    def from_columns(const unsigned char[:] data, Py_ssize_t n, list life, int df_shift):
        """`columns`' bytes (the first 16 * n of `data`) as Entries, each key scheduled at its
        expiry, as HostTable.from_bytes does. Little-endian hosts only (as the dict loader's
        arrays assume their native order too)."""
        if data.shape[0] < 16 * n:
            raise ValueError("short columns")
        cdef Entries out = Entries.__new__(Entries)
        cdef Py_ssize_t i, nlife = len(life), df
        cdef Py_ssize_t last_life = life[nlife - 1]
        out._alloc(max(8, n))  # room for these entries alone (a table read to decide a page or two)
        out.heap = <_Due *>malloc(max(8, n) * sizeof(_Due))
        if out.heap == NULL:
            raise MemoryError()
        out.hcap = max(8, n)
        cdef const unsigned char *base = &data[0] if n else NULL
        cdef uint64_t key
        cdef uint32_t df32, last
        cdef Py_ssize_t s
        for i in range(n):  # (memcpy: the columns follow a 76-byte header, unaligned)
            memcpy(&key, base + 8 * i, 8)
            memcpy(&df32, base + 8 * n + 4 * i, 4)
            memcpy(&last, base + 12 * n + 4 * i, 4)
            if df32 == 0:
                raise ValueError("an entry with a DF of 0")
            df = df32
            s = out._find(key)
            if s >= 0:  # a key twice: the last value, at the first place (as a dict loads it)
                out.vals[s] = (<uint64_t>df << df_shift) | last
            else:
                out._append(key, (<uint64_t>df << df_shift) | last)
            out._push(<uint64_t>last + <uint64_t>(<Py_ssize_t>life[df] if df < nlife else last_life) + 1, key)
        return out


# -- template clusters: MinHash signatures, LSH bands, agreement ---------------------------
# detectors/clusters.py computes the same with numpy (its *_python functions, the
# reference); these save the ~25 small numpy calls a page otherwise costs.

def minhash32(keys, bytes salts):
    """The MinHash signature of a set of 64-bit keys: for each salt s (u64 little-endian in
    `salts`), the high 32 bits of min over the keys of mix(key ^ s), as u32 little-endian
    bytes (all ones for no keys)."""
    cdef Py_ssize_t n_perm = len(salts) // 8, n = 0, i, j
    cdef const unsigned long long *salt = <const unsigned long long *><const char *>salts
    cdef unsigned long long z, low
    cdef unsigned long long[::1] ks
    cdef array.array held = array.array("Q", keys)
    n = len(held)
    ks = held
    out = PyBytes_FromStringAndSize(NULL, n_perm * 4)
    cdef unsigned int *sig = <unsigned int *><char *>out
    for i in range(n_perm):
        low = 0xFFFFFFFFFFFFFFFFULL
        for j in range(n):
            z = _mix(ks[j] ^ salt[i])
            if z < low:
                low = z
        sig[i] = <unsigned int>(low >> 32)
    return out


def bands32(bytes sig, Py_ssize_t bands, bytes mult, bytes salt):
    """LSH band hashes of a u32 signature: band b's hash is the sum over its rows r of
    slot * mult[r], plus salt[b] (u64 arithmetic, wrapping), as a frozenset."""
    cdef Py_ssize_t n = len(sig) // 4, rows = n // bands, b, r
    cdef const unsigned int *s = <const unsigned int *><const char *>sig
    cdef const unsigned long long *m = <const unsigned long long *><const char *>mult
    cdef const unsigned long long *a = <const unsigned long long *><const char *>salt
    cdef unsigned long long h
    if rows * 8 > len(mult) or bands * 8 > len(salt):
        raise ValueError("not enough band constants")
    out = []
    for b in range(bands):
        h = 0
        for r in range(rows):
            h += <unsigned long long>s[b * rows + r] * m[r]
        out.append(h + a[b])
    return frozenset(out)


def agree32(bytes a, bytes b):
    """How many u32 slots of two signatures are equal."""
    cdef Py_ssize_t n = min(len(a), len(b)) // 4, i, count = 0
    cdef const unsigned int *x = <const unsigned int *><const char *>a
    cdef const unsigned int *y = <const unsigned int *><const char *>b
    for i in range(n):
        count += x[i] == y[i]
    return count


# -- a clean record's blocks as JSON (io/codec.py `encode_clean`) -------------------------

cdef extern from "Python.h":
    char *PyOS_double_to_string(double val, char format_code, int precision, int flags, int *ptype) except NULL
    void PyMem_Free(void *p)
    bint PyUnicode_CheckExact(object o)
    bint PyLong_CheckExact(object o)
    bint PyFloat_CheckExact(object o)
    double PyFloat_AS_DOUBLE(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

cdef extern from "<math.h>" nogil:
    bint signbit(double x)

ctypedef struct _Json:
    char *data
    Py_ssize_t length
    Py_ssize_t capacity

cdef const char *_HEX = b"0123456789abcdef"


cdef int _json_room(_Json *out, Py_ssize_t extra) except -1:
    cdef Py_ssize_t want = out.length + extra, capacity = out.capacity if out.capacity else 4096
    cdef char *grown
    if want <= out.capacity:
        return 0
    while capacity < want:
        capacity *= 2
    grown = <char *>realloc(out.data, capacity)
    if grown == NULL:
        raise MemoryError()
    out.data = grown
    out.capacity = capacity
    return 0


cdef inline int _json_raw(_Json *out, const char *s, Py_ssize_t n) except -1:
    _json_room(out, n)
    memcpy(out.data + out.length, s, n)
    out.length += n
    return 0


cdef int _json_str(_Json *out, const char *key, str s, Py_ssize_t limit) except -1:
    """`key` (the field's name, with what precedes it), then `s[:limit]` as orjson writes a
    string; 1 (nothing usable written) on a lone surrogate."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s), i
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef unsigned int c
    cdef char *p
    cdef const unsigned char *a
    _json_raw(out, key, strlen(key))
    if n > limit:
        n = limit
    _json_room(out, 6 * n + 2)  # the longest form of a character: \u00XX, or 4 bytes of UTF-8
    p = out.data + out.length
    p[0] = b'"'
    p += 1
    if PyUnicode_IS_ASCII(s):  # most paths and texts: copied whole unless a character needs escaping
        a = <const unsigned char *>data
        for i in range(n):
            if a[i] < 0x20 or a[i] == 0x22 or a[i] == 0x5c:
                break
        else:
            memcpy(p, a, n)
            p[n] = b'"'
            out.length = p + n + 1 - out.data
            return 0
    for i in range(n):
        c = <unsigned int>PyUnicode_READ(kind, data, i)
        if c < 0x80:
            if c == 0x22 or c == 0x5c:
                p[0] = b'\\'
                p[1] = <char>c
                p += 2
            elif c >= 0x20:
                p[0] = <char>c
                p += 1
            elif c == 0x08 or c == 0x09 or c == 0x0a or c == 0x0c or c == 0x0d:
                p[0] = b'\\'
                p[1] = b'b' if c == 0x08 else b't' if c == 0x09 else b'n' if c == 0x0a else b'f' if c == 0x0c else b'r'
                p += 2
            else:
                memcpy(p, b"\\u00", 4)
                p[4] = _HEX[c >> 4]
                p[5] = _HEX[c & 15]
                p += 6
        elif c < 0x800:
            p[0] = <char>(0xc0 | (c >> 6))
            p[1] = <char>(0x80 | (c & 0x3f))
            p += 2
        elif c < 0x10000:
            if 0xd800 <= c <= 0xdfff:
                return 1
            p[0] = <char>(0xe0 | (c >> 12))
            p[1] = <char>(0x80 | ((c >> 6) & 0x3f))
            p[2] = <char>(0x80 | (c & 0x3f))
            p += 3
        else:
            p[0] = <char>(0xf0 | (c >> 18))
            p[1] = <char>(0x80 | ((c >> 12) & 0x3f))
            p[2] = <char>(0x80 | ((c >> 6) & 0x3f))
            p[3] = <char>(0x80 | (c & 0x3f))
            p += 4
    p[0] = b'"'
    out.length = p + 1 - out.data
    return 0


cdef int _json_int(_Json *out, const char *key, object v, long long *value) except -1:
    """Writes `key` and the int `v`, and sets `value`; 1 (nothing usable written) for one of
    2^40 or more in magnitude (past 64 bits orjson leaves it to json)."""
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    cdef char digits[24]
    cdef Py_ssize_t k = 24
    cdef bint negative = x < 0
    cdef unsigned long long u = (<unsigned long long>0 - <unsigned long long>x) if negative else <unsigned long long>x
    if overflow or x >= (1LL << 40) or x <= -(1LL << 40):
        return 1  # (a bound that keeps the counts' sums in 64 bits, with at most 2^22 blocks)
    while True:
        k -= 1
        digits[k] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if negative:
        k -= 1
        digits[k] = b'-'
    _json_raw(out, key, strlen(key))
    _json_raw(out, digits + k, 24 - k)
    value[0] = x
    return 0


cdef int _json_ratio(_Json *out, const char *key, double x) except -1:
    """`key`, then `round(x, 4)` as json (and orjson) write it, for 0 <= x <= 1; 1 (nothing
    usable written) otherwise."""
    cdef char *s
    cdef Py_ssize_t n
    _json_raw(out, key, strlen(key))
    if x == 0.0 and not signbit(x):
        return _json_raw(out, b"0.0", 3)
    if x == 1.0:
        return _json_raw(out, b"1.0", 3)
    if not (0.0 < x < 1.0):
        return 1
    # The correctly rounded four-place decimal (what round() converts back), its trailing
    # zeros cut: the shortest form of that double, which repr writes.
    s = PyOS_double_to_string(x, b'f', 4, 0, NULL)
    try:
        n = strlen(s)
        while s[n - 1] == b'0':
            n -= 1
        if s[n - 1] == b'.':
            n += 1  # "0." or "1.": keep one zero
        _json_raw(out, s, n)
    finally:
        PyMem_Free(s)
    return 0


def blocks_json(blocks, Py_ssize_t text_chars, str template_label):
    """The JSON array of a clean record's blocks, byte for byte what orjson writes for
    io/codec.py `block_dicts` (the reference): each BlockVerdict (path, text, chars,
    template_chars, ratio, verdict, method, role) as {"path", "chars", "template_chars",
    "ratio" (rounded to 4 places), "verdict", "role", "method", "text" (its first
    `text_chars` characters)}; with the record's "counts" (io/codec.py `counts_dict`): the
    JSON, the blocks whose verdict is `template_label`, the characters of all blocks and of
    those. None where a field is not what the fast form covers (a lone surrogate, a ratio
    outside [0, 1], a field of another type): the caller takes the reference's way."""
    cdef _Json out
    cdef Py_ssize_t i = 0, template_blocks = 0
    cdef long long chars = 0, template_chars = 0, c = 0, t = 0
    cdef tuple b
    out.data = NULL
    out.length = 0
    out.capacity = 0
    try:
        _json_raw(&out, b"[", 1)
        for item in blocks:
            if not isinstance(item, tuple) or i >= (1 << 22):
                return None
            b = <tuple>item
            if len(b) != 8 or not (PyUnicode_CheckExact(b[0]) and PyUnicode_CheckExact(b[1])
                                   and PyLong_CheckExact(b[2]) and PyLong_CheckExact(b[3])
                                   and PyFloat_CheckExact(b[4]) and PyUnicode_CheckExact(b[5])
                                   and PyUnicode_CheckExact(b[6]) and PyUnicode_CheckExact(b[7])):
                return None
            if (_json_str(&out, b'{"path":' if i == 0 else b',{"path":', <str>b[0], PY_SSIZE_T_MAX)
                    or _json_int(&out, b',"chars":', b[2], &c)
                    or _json_int(&out, b',"template_chars":', b[3], &t)
                    or _json_ratio(&out, b',"ratio":', PyFloat_AS_DOUBLE(b[4]))
                    or _json_str(&out, b',"verdict":', <str>b[5], PY_SSIZE_T_MAX)
                    or _json_str(&out, b',"role":', <str>b[7], PY_SSIZE_T_MAX)
                    or _json_str(&out, b',"method":', <str>b[6], PY_SSIZE_T_MAX)
                    or _json_str(&out, b',"text":', <str>b[1], text_chars)):
                return None
            chars += c
            if b[5] == template_label:
                template_blocks += 1
                template_chars += c
            _json_raw(&out, b"}", 1)
            i += 1
        _json_raw(&out, b"]", 1)
        return PyBytes_FromStringAndSize(out.data, out.length), template_blocks, chars, template_chars
    finally:
        free(out.data)
