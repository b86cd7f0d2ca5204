//! End-to-end scenarios against the real local control plane live in tests/.
