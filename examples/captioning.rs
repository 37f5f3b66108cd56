//! Prints the first batches of the captioning example: `cargo run -p energon-examples --example
//! captioning`.
#![allow(clippy::print_stdout)]

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for batch in energon_examples::captioning::loader(2, 8)?.take(3) {
        let batch = batch?.value.value;
        println!(
            "images {:?}, tokens {:?}, keys {:?}",
            batch.images.shape, batch.tokens.shape, batch.keys
        );
    }
    Ok(())
}
