#pragma once
// ModelSpec <-> wire: the one conversion of a model description to and from the protocol (the
// welcome and the checkpoint carry it).
#include "common/ml/model.hpp"
#include "tern.pb.h"

namespace tern {

wire::ModelSpec toWire(const ml::ModelSpec& spec);  // the layout, never the initial values
wire::Tensor toWire(const ml::TensorShape& t);
std::vector<ml::TensorShape> fromWire(const google::protobuf::RepeatedPtrField<wire::Tensor>& ts);
ml::ModelSpec fromWire(const wire::ModelSpec& spec);

}  // namespace tern
