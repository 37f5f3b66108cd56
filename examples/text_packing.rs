//! Prints the first batches of the text packing example: `cargo run -p energon-examples
//! --example text_packing`.
#![allow(clippy::print_stdout)]

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for batch in energon_examples::text_packing::loader(2)?.take(3) {
        let batch = batch?.value.value;
        println!(
            "tokens {:?}, texts per pack {:?}",
            batch.tokens.shape,
            batch.keys.iter().map(Vec::len).collect::<Vec<_>>()
        );
    }
    Ok(())
}
