//! ConductorApi trait and its transports (in-process; RabbitMQ in the oslo.messaging wire format), object serialisation, the notifier.
//!
//! Empty until its issue lands; the folder marks where this layer lives.
