//! softswitch: a P4_16 v1model software switch (front end, interpreter, traffic manager, STF runner).
