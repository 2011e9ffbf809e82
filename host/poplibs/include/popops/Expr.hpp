// popsnn's subset of Poplar's popops expressions for popops::map: placeholders
// _1.._4, constants, and the binary operations of ExprOp.hpp (+, -, * too).
#ifndef POPSNN_POPOPS_EXPR_HPP
#define POPSNN_POPOPS_EXPR_HPP

#include <popops/ExprOp.hpp>

#include <memory>

namespace popops {
namespace expr {

class Expr {
public:
  virtual ~Expr() = default;
  virtual std::unique_ptr<Expr> clone() const = 0;
};

// The n-th tensor (from 1) of map's list.
class PlaceHolder : public Expr {
public:
  explicit PlaceHolder(unsigned index) : index(index) {}
  std::unique_ptr<Expr> clone() const override {
    return std::unique_ptr<Expr>(new PlaceHolder(*this));
  }
  unsigned index;
};

// A value, converted to the element type of the operation it takes part in.
class Const : public Expr {
public:
  template <typename T> Const(T x) : value(static_cast<double>(x)) {}
  std::unique_ptr<Expr> clone() const override { return std::unique_ptr<Expr>(new Const(*this)); }
  double value;
};

class BinaryOp : public Expr {
public:
  BinaryOp(BinaryOpType type, const Expr &a, const Expr &b)
      : type(type), a(a.clone()), b(b.clone()) {}
  BinaryOp(const BinaryOp &other)
      : Expr(), type(other.type), a(other.a->clone()), b(other.b->clone()) {}
  std::unique_ptr<Expr> clone() const override {
    return std::unique_ptr<Expr>(new BinaryOp(*this));
  }
  BinaryOpType type;
  std::unique_ptr<Expr> a, b;
};

#define POPSNN_POPOPS_BINARY(Name, Kind)                                                           \
  class Name : public BinaryOp {                                                                   \
  public:                                                                                          \
    Name(const Expr &a, const Expr &b) : BinaryOp(BinaryOpType::Kind, a, b) {}                     \
  };
POPSNN_POPOPS_BINARY(Add, ADD)
POPSNN_POPOPS_BINARY(Sub, SUBTRACT)
POPSNN_POPOPS_BINARY(Mul, MULTIPLY)
POPSNN_POPOPS_BINARY(Max, MAXIMUM)
POPSNN_POPOPS_BINARY(Min, MINIMUM)
#undef POPSNN_POPOPS_BINARY

inline Add operator+(const Expr &a, const Expr &b) { return Add(a, b); }
inline Sub operator-(const Expr &a, const Expr &b) { return Sub(a, b); }
inline Mul operator*(const Expr &a, const Expr &b) { return Mul(a, b); }

static const PlaceHolder _1(1), _2(2), _3(3), _4(4);

} // namespace expr
} // namespace popops

#endif
