#include "model_spec.hpp"

namespace tern {

wire::Tensor toWire(const ml::TensorShape& t) {
  wire::Tensor w;
  w.set_name(t.name);
  for (uint64_t d : t.shape) w.add_shape(d);
  return w;
}

std::vector<ml::TensorShape> fromWire(const google::protobuf::RepeatedPtrField<wire::Tensor>& ts) {
  std::vector<ml::TensorShape> out;
  out.reserve(size_t(ts.size()));
  for (const auto& t : ts) out.push_back({t.name(), {t.shape().begin(), t.shape().end()}});
  return out;
}

wire::ModelSpec toWire(const ml::ModelSpec& spec) {
  wire::ModelSpec w;
  w.set_kind(spec.kind);
  w.set_features(spec.features);
  w.set_classes(spec.classes);
  w.set_hidden(spec.hidden);
  w.set_l2(spec.l2);
  for (const auto& t : spec.tensors) *w.add_tensors() = toWire(t);
  return w;
}

ml::ModelSpec fromWire(const wire::ModelSpec& w) {
  ml::ModelSpec spec;
  spec.kind = w.kind();
  spec.features = w.features();
  spec.classes = w.classes();
  spec.hidden = w.hidden();
  spec.l2 = w.l2();
  spec.tensors = fromWire(w.tensors());
  return spec;
}

}  // namespace tern
