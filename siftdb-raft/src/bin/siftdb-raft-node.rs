//! One node of a siftdb cluster, served over TCP:
//! `siftdb-raft-node --id N --listen HOST:PORT --dir DIR [--keyspace NAME]... [--no-sync]`.
//! A client initializes the cluster and adds nodes through the same port (see
//! `siftdb_raft::network::tcp::TcpClient`).

use siftdb_raft::network::tcp::NodeArgs;

#[tokio::main]
async fn main() {
    let args = match NodeArgs::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("siftdb-raft-node: {e}");
            std::process::exit(2);
        }
    };
    let id = args.id;
    if let Err(e) = args.run().await {
        eprintln!("siftdb-raft-node {id}: {e}");
        std::process::exit(1);
    }
}
