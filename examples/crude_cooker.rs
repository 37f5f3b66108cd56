//! Prints the first batches of the crude cooker example: `cargo run -p energon-examples
//! --example crude_cooker`.
#![allow(clippy::print_stdout)]

use energon_reader::Sample;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for batch in energon_examples::crude_cooker::loader(2)?.take(3) {
        for sample in batch?.value.value.samples {
            if let Sample::Captioning(s) = &sample.value {
                println!("{} {:?} {:?}", s.meta.key, s.image.shape, s.caption);
            }
        }
    }
    Ok(())
}
