// The binding table as data, shared by `switchyard coverage --json` and
// `switchyard report`: each alternative with the verification state of its
// precision claim, and the ops x dtypes map the report draws.
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "switchyard/binding_table.h"
#include "switchyard/verify.h"

namespace switchyard::tool {

// Where an entry's precision claim stands for its current revision: "verified"
// (the ledger holds a pass), "failed" (its last verdict failed), "unverified"
// (never audited at this revision, or skipped), "unaudited" (no claim to check).
[[nodiscard]] std::string_view verification_state(const BindingEntry& entry,
                                                  const VerificationLedger& ledger);

// One alternative as `coverage --json` prints it: name, source, caps, precision,
// cost, revision hash, verification state and registration site.
[[nodiscard]] nlohmann::json alternative_json(const BindingEntry& entry,
                                              const VerificationLedger& ledger);

// Note [The coverage map]
//   The report draws the table as one grid per backend: a row per op, a column
//   per dtype. A key sits in the column of its first dtype that is not f32
//   (inputs, then the output), and in the f32 column when all of them are f32;
//   so matmul's q4_k weights and its f32 activations meet in the q4_k column, and
//   a cast from f32 to f16 sits under f16. One cell may hold several keys (a cast
//   each way); it shows their sibling count, the tightest precision claim among
//   them (bounded before no-bound before unaudited, then the smallest bound, ULPs
//   counted at f32's epsilon; bit-stable breaks a tie) and the weakest
//   verification state (failed, then unverified, then verified; unaudited only
//   when no alternative makes a claim).
//
// {"backends": [{"backend", "ops": [...], "dtypes": [...], "cells": [{"op",
// "dtype", "siblings", "best_precision", "state", "states": {state: count},
// "keys": [{"signature", "alternatives": [alternative_json...]}]}]}],
// "summary": {state: count}}. `only` keeps one backend.
[[nodiscard]] nlohmann::json coverage_map_json(const KernelBindingTable& table,
                                               const VerificationLedger& ledger,
                                               std::optional<BackendId> only);

}  // namespace switchyard::tool
