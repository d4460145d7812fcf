#include "model_spec.hpp"

namespace tern {

wire::ModelSpec toWire(const ml::ModelSpec& spec) {
  wire::ModelSpec w;
  w.set_kind(spec.kind);
  w.set_features(spec.features);
  w.set_classes(spec.classes);
  w.set_hidden(spec.hidden);
  w.set_l2(spec.l2);
  return w;
}

ml::ModelSpec fromWire(const wire::ModelSpec& w) {
  ml::ModelSpec spec;
  spec.kind = w.kind();
  spec.features = w.features();
  spec.classes = w.classes();
  spec.hidden = w.hidden();
  spec.l2 = w.l2();
  return spec;
}

}  // namespace tern
