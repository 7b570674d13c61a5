//! RoCEv2 traffic: a paced sender and a counting receiver.
