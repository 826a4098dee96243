pub(crate) mod auth;
mod capabilities;
pub(crate) mod connect;
mod packet;
pub(crate) mod response;
pub(crate) mod row;
pub(crate) mod statement;
pub(crate) mod text;

pub(crate) use capabilities::Capabilities;
pub(crate) use packet::Packet;
pub(crate) use row::Row;
