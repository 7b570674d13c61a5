#include <core.p4>
#include <v1model.p4>
#include "missing.p4"
header h_t { bit<8> a; }
control I(inout h_t h) {
    apply { h.a = h.b + (((((((1)))))); }
