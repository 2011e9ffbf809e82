// popops::map over an expression: each operation of the tree becomes one
// elementwise map (a compute set of PopsnnBinary vertices); constants become
// constant tensors mapped as the operand they meet.
#include <popops/ElementWise.hpp>

#include <poplar/exceptions.hpp>

namespace popops {
namespace {

struct Evaluator {
  poplar::Graph &graph;
  const std::vector<poplar::Tensor> &ts;
  poplar::program::Sequence &prog;
  const poplar::DebugContext &debugContext;

  const expr::Const *asConst(const expr::Expr &e) const {
    return dynamic_cast<const expr::Const *>(&e);
  }

  poplar::Tensor constantLike(const expr::Const &c, const poplar::Tensor &like) {
    poplar::Tensor t = graph.addConstant(like.elementType(), like.shape(), c.value,
                                         {debugContext, "popops::map/const"});
    graph.setTileMapping(t, graph.getTileMapping(like));
    return t;
  }

  poplar::Tensor operator()(const expr::Expr &e) {
    if (const auto *p = dynamic_cast<const expr::PlaceHolder *>(&e)) {
      if (p->index == 0 || p->index > ts.size())
        throw poplar::poplar_error("popops::map: the expression uses _" + std::to_string(p->index) +
                                   " but " + std::to_string(ts.size()) +
                                   " tensors were given; pass one tensor per placeholder");
      return ts[p->index - 1];
    }
    if (const auto *op = dynamic_cast<const expr::BinaryOp *>(&e)) {
      const expr::Const *ca = asConst(*op->a), *cb = asConst(*op->b);
      if (ca && cb)
        throw poplar::poplar_error("popops::map: an operation on two constants; compute it on "
                                   "the host and pass one constant");
      poplar::Tensor a = ca ? poplar::Tensor() : (*this)(*op->a);
      poplar::Tensor b = cb ? poplar::Tensor() : (*this)(*op->b);
      if (ca)
        a = constantLike(*ca, b);
      if (cb)
        b = constantLike(*cb, a);
      return map(graph, op->type, a, b, prog, debugContext);
    }
    throw poplar::poplar_error("popops::map: popsnn's popops evaluates placeholders, constants "
                               "and binary operations only; a constant must meet a tensor");
  }
};

} // namespace

poplar::Tensor map(poplar::Graph &graph, const expr::Expr &expr,
                   const std::vector<poplar::Tensor> &ts, poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext, const poplar::OptionFlags &) {
  Evaluator evaluate{graph, ts, prog, debugContext};
  poplar::Tensor result = evaluate(expr);
  if (dynamic_cast<const expr::PlaceHolder *>(&expr)) {
    // map always returns a new tensor, also for a bare placeholder.
    poplar::Tensor copy = graph.clone(result, {debugContext, "popops::map"});
    prog.add(poplar::program::Copy(result, copy));
    return copy;
  }
  return result;
}

} // namespace popops
