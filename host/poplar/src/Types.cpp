#include "poplar/Type.hpp"

namespace poplar {

// Ids are stable: the runtime's element conversions switch on them (see TypeConvert.hpp).
const Type BOOL(1, "bool", 1);
const Type CHAR(2, "char", 1);
const Type UNSIGNED_CHAR(3, "unsigned char", 1);
const Type SIGNED_CHAR(4, "signed char", 1);
const Type SHORT(5, "short", 2);
const Type UNSIGNED_SHORT(6, "unsigned short", 2);
const Type INT(7, "int", 4);
const Type UNSIGNED_INT(8, "unsigned int", 4);
const Type LONGLONG(9, "long long", 8);
const Type UNSIGNED_LONGLONG(10, "unsigned long long", 8);
const Type HALF(11, "half", 2);
const Type FLOAT(12, "float", 4);

} // namespace poplar
